"""Sizing each shared engine's KV cache on an emulated budget from one engine alone: the arguments it starts
vLLM with, the figure read from vLLM's own start-up line (as committed logs of real runs print it), one line on
every failure, and each distinct engine profiled once before the plan is run."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from serving_lab.rehearse import cli, kv_profile, overrides, ray_cluster
from serving_lab.rehearse.host import Gpu, Host

from ...helpers import ROOT, stage_data, write_stage
from . import fake_vllm
from .arguments import rehearse_args, rehearse_pd

ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
MODEL = Path("/models/qwen3.5-9b")
RUNS = ROOT / "evidence"


@pytest.fixture
def dev(dev_unsized):
    """A stage that fixes its KV cache needs no profile (test_emulate_node.py): these tests profile one that does not."""
    return dev_unsized


def _shared_plan(cfg) -> overrides.Plan:
    return overrides.plan(
        cfg,
        overrides.PlanRequest(
            mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=False, emulate_node=True, share_gpus=True
        ),
    )


@pytest.mark.parametrize(
    ("log", "figure"),
    [
        ("2026-12-01-h200-tuned/runs/profile-graphs-text.log", 2827682907),
        ("2026-12-01-h200-l4-emulated/runs/profile-rendered.log", 207569499),
        ("2026-12-01-h200-l4-emulated/runs/profile-fp8-graphs-text.log", 9752372315),
    ],
)
def test_the_figure_is_read_from_vllms_line_as_real_runs_printed_it(log, figure):
    assert kv_profile.fit_bytes((RUNS / log).read_text()) == figure


def test_the_figure_to_fully_use_the_gpu_is_not_taken_for_the_one_that_fits_the_budget():
    line = "Replace ... with `--kv-cache-memory=130754326528` (121.77 GiB) to fully utilize gpu memory."
    assert kv_profile.fit_bytes(line) is None


def test_an_engine_alone_gets_the_plans_settings_less_the_kv_connector(dev):
    plan = _shared_plan(dev)
    (_path, llm), _ = overrides.llm_configs(plan.serve_config)
    args = kv_profile.engine_args(llm)
    assert args["model"] == str(MODEL)
    assert "kv_transfer_config" not in args and "kv_cache_memory_bytes" not in args
    kept = {k: v for k, v in llm["engine_kwargs"].items() if k != "kv_transfer_config"}
    assert {k: v for k, v in args.items() if k != "model"} == kept
    assert args["gpu_memory_utilization"] == 0.1441  # the emulated budget, as the engine runs with it


def _fake_python(tmp_path: Path, body: str) -> str:
    """A `python` that records its arguments and environment and runs `body` (shell)."""
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nprintf "%s" "$3" > "{tmp_path}/args.json"\nenv > "{tmp_path}/env.txt"\n{body}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return str(fake)


FIT = "echo 'INFO Replace gpu_memory_utilization config with `--kv-cache-memory=2827682907` (2.63 GiB) to fit into requested memory, or ...'"


def test_each_distinct_engine_is_profiled_once_and_every_config_gets_its_figure(tmp_path, dev):
    plan = _shared_plan(dev)
    said: list[str] = []
    figures = kv_profile.size_caches(
        plan, out=tmp_path, timeout=30, say=said.append, python=_fake_python(tmp_path, FIT), environ={"PATH": "/bin"}
    )
    assert figures == dict.fromkeys(plan.kv_profiles, 2827682907)
    assert sum(line.startswith("sizing the KV cache of") for line in said) == 1  # prefill and decode alike in dev
    args = json.loads((tmp_path / "args.json").read_text())
    assert args["model"] == str(MODEL) and "kv_transfer_config" not in args
    env = (tmp_path / "env.txt").read_text().splitlines()
    assert "HF_HUB_OFFLINE=1" in env and "VLLM_HOST_IP=127.0.0.1" in env  # the plan's engine environment
    assert (tmp_path / "kv-profile-pd-prefill_config.log").read_text().count("--kv-cache-memory=2827682907") == 1


def test_engines_of_different_settings_are_profiled_each(tmp_path, dev):
    from config.schema import RoleEngine

    decode = dev.serving.decode.model_copy(update={"engine": RoleEngine(max_num_seqs=16)})
    cfg = dev.model_copy(update={"serving": dev.serving.model_copy(update={"decode": decode})})
    plan = _shared_plan(cfg)
    said: list[str] = []
    kv_profile.size_caches(plan, out=tmp_path, timeout=30, say=said.append, python=_fake_python(tmp_path, FIT))
    assert [line.split(":")[0] for line in said if line.startswith("sizing")] == [
        "sizing the KV cache of prefill_config",
        "sizing the KV cache of decode_config",
    ]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("echo 'torch.OutOfMemoryError: CUDA out of memory'; exit 1", "printed no '--kv-cache-memory=N"),
        ("sleep 5", "did not finish starting within 1 s"),
        (FIT.replace("2827682907", "0"), "holds no KV cache for these engine settings"),
    ],
)
def test_a_profile_that_fails_is_one_line_naming_its_log(tmp_path, dev, body, says):
    plan = _shared_plan(dev)
    with pytest.raises(kv_profile.KvProfileError) as error:
        kv_profile.size_caches(
            plan, out=tmp_path, timeout=1, say=lambda line: None, python=_fake_python(tmp_path, body)
        )
    message = str(error.value)
    assert len(message.splitlines()) == 1 and says in message
    assert message.startswith(str(tmp_path / "kv-profile-pd-prefill_config.log"))
    if "OutOfMemoryError" in body:
        assert "CUDA out of memory" in message and "exit 1" in message


def test_rehearse_profiles_first_then_runs_the_plan_with_the_figures(tmp_path, dev, monkeypatch):
    seen = {}

    def size_caches(plan, *, out, timeout, say, found):
        seen["asked"] = list(plan.kv_profiles)
        return dict.fromkeys(plan.kv_profiles, 2827682907)

    class Head:
        def __init__(self, **kwargs):
            Path(kwargs["temp_dir"], "session_latest", "logs").mkdir(parents=True)

        def start(self):
            raise ray_cluster.RayError("ray start: stopped here")

        def stop(self):
            pass

    monkeypatch.setattr(kv_profile, "size_caches", size_caches)
    monkeypatch.setattr(ray_cluster, "RayHead", Head)
    args = rehearse_args(tmp_path, share_gpus=True, emulate_node=True)
    report, _ = rehearse_pd(dev, args, host=ONE_H200, tmp_path=tmp_path, model=MODEL)
    assert seen["asked"] == ["applications[0].args.prefill_config", "applications[0].args.decode_config"]
    written = json.loads((tmp_path / "out" / "plan-pd.json").read_text())
    assert "kv_profiles" not in written
    kv = [o for o in written["overrides"] if o["path"].endswith("kv_cache_memory_bytes")]
    assert [o["after"] for o in kv] == [2827682907, 2827682907]
    assert report.find("application RUNNING").detail == "ray start: stopped here"


def test_a_failed_profile_is_exit_1_with_its_one_line(tmp_path, dev, monkeypatch, capsys):
    from serving_lab.rehearse import host as host_facts

    def size_caches(plan, *, out, timeout, say, found):
        raise kv_profile.KvProfileError("out/kv-profile-pd-prefill_config.log: one engine alone printed no line")

    monkeypatch.setattr(host_facts, "detect", lambda: ONE_H200)
    monkeypatch.setattr(cli, "model_folder", lambda cfg, args, work: (tmp_path, False))
    monkeypatch.setattr(kv_profile, "size_caches", size_caches)
    data = stage_data()
    del data["serving"]["engine"]["extra_args"]["kv_cache_memory_bytes"]  # a stage whose KV cache vLLM sizes
    stages = tmp_path / "stages"
    stages.mkdir()
    write_stage(stages, data)
    assert cli.run(rehearse_args(tmp_path, share_gpus=True, emulate_node=True, config_dir=str(stages))) == 1
    assert capsys.readouterr().err.strip() == (
        "rehearse: out/kv-profile-pd-prefill_config.log: one engine alone printed no line"
    )


def test_the_profile_script_starts_vllms_offline_engine_with_the_engines_arguments(tmp_path, dev):
    # A stand-in `vllm` package on the path records what `LLM` was called with, and prints vLLM's line.
    site = fake_vllm.install(
        tmp_path / "site",
        f"open({str(tmp_path / 'called.json')!r}, 'w').write(json.dumps(kwargs))\n"
        "print('Replace ... `--kv-cache-memory=123456789` (0.11 GiB) to fit into requested memory')\n",
    )
    plan = _shared_plan(dev)
    (_path, llm), _ = overrides.llm_configs(plan.serve_config)
    env = {**os.environ, "PYTHONPATH": str(site)}
    figure = kv_profile.profile(llm, env=env, log=tmp_path / "profile.log", timeout=60)
    assert figure == 123456789
    assert json.loads((tmp_path / "called.json").read_text()) == kv_profile.engine_args(llm)


def test_a_real_checkpoints_frontend_setting_is_not_handed_to_the_offline_engine(tmp_path, dev):
    # vllm.LLM refuses enable_prompt_tokens_details (a FrontendArgs field); Ray Serve LLM hands it to the frontend
    site = fake_vllm.install(
        tmp_path / "site",
        f"open({str(tmp_path / 'called.json')!r}, 'w').write(json.dumps(kwargs))\n"
        "print('Replace ... `--kv-cache-memory=123456789` (0.11 GiB) to fit into requested memory')\n",
    )
    request = overrides.PlanRequest(
        mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=True, emulate_node=True, share_gpus=True
    )
    (_path, llm), _ = overrides.llm_configs(overrides.plan(dev, request).serve_config)
    assert kv_profile.engine_args(llm)["enable_prompt_tokens_details"] is True
    kv_profile.profile(llm, env={**os.environ, "PYTHONPATH": str(site)}, log=tmp_path / "profile.log", timeout=60)
    called = json.loads((tmp_path / "called.json").read_text())
    assert "enable_prompt_tokens_details" not in called
    assert called == {k: v for k, v in kv_profile.engine_args(llm).items() if k != "enable_prompt_tokens_details"}


def test_pd_and_colocated_of_one_rehearsal_profile_an_engine_once(tmp_path, dev):
    # the colocated config has the same engine settings as PD's, less the KV connector the profile drops
    python, said = _fake_python(tmp_path, FIT), []
    found: dict[str, int] = {}
    for mode in ("pd", "colocated"):
        plan = overrides.plan(
            dev,
            overrides.PlanRequest(
                mode=mode, host=ONE_H200, model_dir=MODEL, real_weights=False, emulate_node=True, share_gpus=True
            ),
        )
        figures = kv_profile.size_caches(plan, out=tmp_path, timeout=30, say=said.append, python=python, found=found)
        assert set(figures.values()) == {2827682907}
    assert sum(line.startswith("sizing the KV cache of") for line in said) == 1
