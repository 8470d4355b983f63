"""`ops rehearse --emulate-node`: each engine gets the memory budget of the stage's GPU node (an L4 of
g6.8xlarge for dev and prod) on the host's GPU, and vLLM 0.26's batch defaults for that GPU; every change
is a recorded override and the results are labelled. Without the flag the plan is today's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config.instance_types import GPU_MEMORY_MIB, INSTANCE_TYPES, known_types
from ops.__main__ import main
from serving_lab.rehearse import cli, overrides
from serving_lab.rehearse.host import Gpu, Host

from ...helpers import ROOT, config_with
from .arguments import rehearse_args

ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
H200_PAIR = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),) * 2, efa_devices=())
MODEL = Path("/models/qwen3.5-9b")
LABEL = "L4 memory budget on an H200: memory emulated, speed is the H200's"
SIDES = ("prefill_config", "decode_config")


# What one engine alone found on the L4 budget of one H200 (evidence/2026-12-01-h200-l4-budget/,
# profile-eager.log: vLLM's "--kv-cache-memory=2113009755").
PROFILED_KV = 2113009755


def _plan(cfg, mode="pd", host=ONE_H200, **options):
    options.setdefault("share_gpus", True)
    if options["share_gpus"] and len(host.gpus) == 1:
        options.setdefault("kv_cache_bytes", PROFILED_KV)
    return overrides.plan(
        cfg,
        overrides.PlanRequest(mode=mode, host=host, model_dir=MODEL, real_weights=False, emulate_node=True, **options),
    )


def _engines(plan):
    args = plan.serve_config["applications"][0]["args"]
    return [
        llm["engine_kwargs"]
        for llm in (args["llm_configs"] if "llm_configs" in args else [args[side] for side in SIDES])
    ]


def _changed(plan, key):
    return [o for o in plan.overrides if o.path.endswith(f".engine_kwargs.{key}")]


def _batch_defaults_unset(cfg):
    """The stage with vLLM's batch sizes left to vLLM (the committed stages set max_num_seqs themselves)."""
    engine = cfg.serving.engine.model_copy(update={"max_num_seqs": None, "max_num_batched_tokens": None})
    return cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"engine": engine})})


def test_a_max_num_seqs_the_stage_sets_is_kept_not_pinned(stages):
    plan = _plan(stages["dev"], "pd")
    assert [engine["max_num_seqs"] for engine in _engines(plan)] == [stages["dev"].serving.engine.max_num_seqs] * 2
    assert not _changed(plan, "max_num_seqs")
    assert len(_changed(plan, "max_num_batched_tokens")) == 2


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_each_engine_gets_the_l4_budget_of_g6_8xlarge_on_one_h200(stages, stage, mode):
    plan = _plan(_batch_defaults_unset(stages[stage]), mode)
    assert plan.num_gpus == 1 and plan.engines == 2 and plan.label == LABEL
    for engine in _engines(plan):
        # 0.90 x 23,034 MiB / 143,771 MiB = 0.144191..., rounded down
        assert engine["gpu_memory_utilization"] == 0.1441
        assert (engine["max_num_seqs"], engine["max_num_batched_tokens"]) == (256, 2048)
        # engines sharing the GPU cannot profile side by side: the KV cache one engine alone found
        assert engine["kv_cache_memory_bytes"] == PROFILED_KV
    for override in _changed(plan, "gpu_memory_utilization"):
        assert (override.before, override.after) == (0.9, 0.1441)
        assert override.reason == "the L4 budget of g6.8xlarge: 0.9 x 23034 MiB of the host's 143771 MiB"
    for key, value, native in (("max_num_seqs", 256, 1024), ("max_num_batched_tokens", 2048, 8192)):
        changed = _changed(plan, key)
        assert len(changed) == len(_engines(plan))
        for override in changed:
            assert (override.before, override.after) == (None, value)
            assert override.reason == (
                "vLLM 0.26's default for the OpenAI server on the L4 of g6.8xlarge (a GPU under 70 GiB: "
                "vllm/engine/arg_utils.py EngineArgs.get_batch_defaults); on the host's H200 it would take "
                f"{native}"
            )
    assert [o.after for o in _changed(plan, "kv_cache_memory_bytes")] == [PROFILED_KV] * len(_engines(plan))
    assert plan.to_json()["label"] == LABEL


def test_the_engines_still_share_the_gpu_and_the_budgets_are_every_engines_own(dev):
    plan = _plan(dev)
    args = plan.serve_config["applications"][0]["args"]
    assert [args[side]["placement_group_config"] for side in SIDES] == [{"bundle_per_worker": {"GPU": 0.5}}] * 2
    assert plan.env["VLLM_RAY_PER_WORKER_GPUS"] == "0.5"
    # one override per engine and setting, none twice (the share's 0.42 is not set when emulating)
    paths = [o.path for o in plan.overrides]
    assert len(paths) == len(set(paths))
    assert [o.after for o in _changed(plan, "gpu_memory_utilization")] == [0.1441, 0.1441]


def test_every_emulated_engine_config_validates_with_rays_llm_config(dev):
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    args = _plan(_batch_defaults_unset(dev)).serve_config["applications"][0]["args"]
    for side in SIDES:
        assert LLMConfig.model_validate(args[side]).engine_kwargs["max_num_seqs"] == 256


def test_on_a_pair_of_h200s_each_engine_has_a_gpu_and_the_same_budget(dev):
    plan = _plan(dev, host=H200_PAIR, share_gpus=False)
    assert plan.num_gpus == 2 and plan.label == LABEL
    assert [e["gpu_memory_utilization"] for e in _engines(plan)] == [0.1441, 0.1441]
    assert not [o for o in plan.overrides if o.path.endswith("placement_group_config")]


def test_the_stages_own_fraction_is_scaled(tmp_path):
    cfg = config_with(tmp_path, serving={"engine": {"gpu_memory_utilization": 0.85}})
    plan = _plan(cfg)
    # 0.85 x 23,034 / 143,771 = 0.136181...
    assert [e["gpu_memory_utilization"] for e in _engines(plan)] == [0.1361, 0.1361]
    assert _changed(plan, "gpu_memory_utilization")[0].reason == (
        "the L4 budget of g6.8xlarge: 0.85 x 23034 MiB of the host's 143771 MiB"
    )


def test_a_stage_that_sets_max_num_seqs_keeps_it(tmp_path):
    cfg = config_with(tmp_path, serving={"engine": {"max_num_seqs": 64}})
    plan = _plan(cfg)
    for engine in _engines(plan):
        assert engine["max_num_seqs"] == 64
        assert engine["max_num_batched_tokens"] == 2048  # min(64 x 4096, 2048): vLLM's rule for an unset value
    assert not _changed(plan, "max_num_seqs")
    both = _plan(config_with(tmp_path, serving={"engine": {"max_num_seqs": 64, "max_num_batched_tokens": 4096}}))
    assert not _changed(both, "max_num_seqs") and not _changed(both, "max_num_batched_tokens")
    assert [(e["max_num_seqs"], e["max_num_batched_tokens"]) for e in _engines(both)] == [(64, 4096)] * 2


def test_vllms_batch_defaults_by_gpu():
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, UsageContext.OPENAI_API_SERVER
    assert overrides.vllm_batch_defaults(23034, "L4") == (256, 2048)
    assert overrides.vllm_batch_defaults(46068, "L40S") == (256, 2048)
    assert overrides.vllm_batch_defaults(81559, "H100") == (1024, 8192)
    assert overrides.vllm_batch_defaults(143771, "NVIDIA H200") == (1024, 8192)
    assert overrides.vllm_batch_defaults(81920, "NVIDIA A100-SXM4-80GB") == (256, 2048)  # A100s excluded
    assert overrides.vllm_batch_defaults(70 * 1024, "X") == (1024, 8192)
    assert overrides.vllm_batch_defaults(70 * 1024 - 1, "X") == (256, 2048)


def test_an_instance_type_whose_gpu_memory_is_unknown_is_refused_in_one_line(dev, monkeypatch):
    monkeypatch.delitem(GPU_MEMORY_MIB, "L4")
    with pytest.raises(overrides.PlanError) as error:
        _plan(dev)
    assert str(error.value) == (
        "--emulate-node: config/instance_types.py: g6.8xlarge: the memory of its L4 is not known (GPU_MEMORY_MIB "
        "has A100, A10G, H100, H200, L40S); add the driver's figure (nvidia-smi --query-gpu=memory.total) to "
        "emulate it"
    )


def test_an_instance_type_with_no_gpu_model_is_refused_in_one_line(dev, monkeypatch):
    from config.instance_types import InstanceSpec

    monkeypatch.setitem(INSTANCE_TYPES, "g6.8xlarge", InstanceSpec(vcpus=32, memory_gib=128, gpus=1, network_gbps=25.0))
    with pytest.raises(overrides.PlanError) as error:
        _plan(dev)
    assert str(error.value) == "--emulate-node: config/instance_types.py: g6.8xlarge: no GPU model recorded for it"


def test_budgets_that_do_not_fit_the_host_gpu_are_refused(dev, tmp_path):
    # two engines of 0.9 x 23,034 MiB on one A100 of 40,960 MiB: 2 x 0.5061 of it
    a100 = Host(gpus=(Gpu("NVIDIA A100-SXM4-40GB", 40960, "8.0"),), efa_devices=())
    with pytest.raises(overrides.PlanError) as error:
        _plan(dev, host=a100)
    assert str(error.value) == (
        "--emulate-node: 2 engine(s) on each GPU x 0.5061 of the host's 40960 MiB = 1.012 "
        "of it: the L4 budgets of g6.8xlarge do not fit this host's A100-SXM4-40GB"
    )
    # an L40S node's budget is larger than an L4 host's whole GPU
    l40s = config_with(tmp_path, gpu_nodegroup={"instance_type": "g6e.8xlarge"})
    l4_pair = Host(gpus=(Gpu("NVIDIA L4", 23034, "8.9"),) * 2, efa_devices=())
    with pytest.raises(
        overrides.PlanError,
        match=r"^--emulate-node: 1 engine\(s\) on each GPU x 1\.8 .* the L40S "
        r"budgets of g6e\.8xlarge do not fit this host's L4$",
    ):
        _plan(l40s, host=l4_pair, share_gpus=False)


def test_host_gpus_of_different_memory_are_refused(dev):
    mixed = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"), Gpu("NVIDIA H100 80GB HBM3", 81559, "9.0")), efa_devices=())
    with pytest.raises(
        overrides.PlanError,
        match=r"^--emulate-node: the host's GPUs differ in memory "
        r"\(143771 MiB, 81559 MiB\): use --gpus N",
    ):
        _plan(dev, host=mixed, share_gpus=False)


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_without_the_flag_the_plan_is_todays(stages, stage, mode):
    today = overrides.plan(
        stages[stage], overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False)
    )
    off = overrides.plan(
        stages[stage],
        overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False, emulate_node=False),
    )
    assert off == today and off.label == "" and "label" not in off.to_json()
    snapshot = ROOT / "tests" / "snapshots" / stage / f"rehearsal-{mode}.json"
    assert json.dumps(off.to_json(), indent=1, sort_keys=True) + "\n" == snapshot.read_text()
    shared = overrides.plan(
        stages[stage],
        overrides.PlanRequest(mode=mode, host=ONE_H200, model_dir=MODEL, real_weights=False, share_gpus=True),
    )
    own = stages[stage].serving.engine.max_num_seqs
    for engine in _engines(shared):  # --share-gpus alone: its own split and fixed KV cache, as before
        assert engine["gpu_memory_utilization"] == 0.42 and engine.get("max_num_seqs") == own
        assert engine["kv_cache_memory_bytes"] == int(143771 * 2**20 * overrides.SHARED_KV_CACHE_FRACTION)


def test_the_table_has_the_drivers_figure_for_every_gpu_type():
    for name in known_types(gpu=True):
        spec = INSTANCE_TYPES[name]
        # the driver's MiB are a little under the marketed GB (an L4: 23,034 MiB of "24 GB")
        assert 0.9 < spec.gpu_memory_mib / (spec.gpu_memory_gib / spec.gpus * 1024) <= 1.0, name
    assert {INSTANCE_TYPES[t].gpu_model: INSTANCE_TYPES[t].gpu_memory_mib for t in known_types(gpu=True)} == {
        "L4": 23034,
        "L40S": 46068,
        "A10G": 23028,
        "A100": 40960,
        "H100": 81559,
        "H200": 143771,
    }


def test_the_flag_is_accepted(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # stops at the host check: the arguments were accepted
    assert main(["rehearse", "--stage", "dev", "--share-gpus", "--emulate-node"]) == 1
    assert "nvidia-smi not found" in capsys.readouterr().err


def test_the_benchmark_results_carry_the_label(tmp_path, dev, monkeypatch):

    from serving_lab.bench import aiperf, runner

    seen = {}

    def run_stage(cfg, **kwargs):
        seen.update(kwargs)
        return None, tmp_path / "run.json"

    monkeypatch.setattr(runner, "run_stage", run_stage)
    monkeypatch.setattr(aiperf, "find_executable", lambda given: "/bin/aiperf")
    args = rehearse_args(tmp_path, levels="1,4,16", profile=["chat"])
    plan = _plan(dev)
    memory = [{"engine": "Prefill:qwen3_5-9b abcdefgh", "kv_cache_gib": 2.1}]
    cli._bench(
        dev,
        args,
        mode="pd",
        host=ONE_H200,
        plan=plan,
        model=MODEL,
        out=tmp_path,
        deadline=None,
        say=lambda line: None,
        engine_memory=memory,
    )
    assert seen["note"] == (
        "rehearsal: 1 x NVIDIA H200 shared by 2 engines, dummy weights of Qwen/Qwen3.5-9B, UCX "
        f"on one host, not EFA; {LABEL}; not g6.8xlarge"
    )
    recorded = seen["adjust"].recorded["rehearsal"]
    assert recorded["label"] == LABEL and recorded["engine_memory"] == memory
    hardware = seen["adjust"].hardware
    assert hardware.instance_type == "rehearsal host, engines sharing one GPU, L4 memory budget on an H200"
    assert hardware.title == (
        "1 x rehearsal host, engines sharing one GPU, L4 memory budget on an H200 (1 x NVIDIA H200, no EFA)"
    )


def test_sharing_a_gpu_on_an_emulated_budget_without_a_figure_asks_for_a_profile_of_each_engine(dev_unsized):
    # Side by side, each engine counted the other's weights as its own (seen on an H200: KV -16.87 GiB): without
    # --kv-cache-bytes or a fixed size in the stage, the plan names the engine configs whose KV cache one engine
    # alone must size first.
    plan = _plan(dev_unsized, kv_cache_bytes=None)
    assert plan.kv_profiles == [f"applications[0].args.{side}" for side in SIDES]
    assert all("kv_cache_memory_bytes" not in engine for engine in _engines(plan))
    assert plan.to_json()["kv_profiles"] == plan.kv_profiles


def test_each_engine_gets_the_figure_its_own_profile_found(dev):
    found = {"applications[0].args.prefill_config": 3_000_000_000, "applications[0].args.decode_config": 2_827_682_907}
    plan = _plan(dev, kv_cache_bytes=found)
    assert plan.kv_profiles == [] and "kv_profiles" not in plan.to_json()
    assert [engine["kv_cache_memory_bytes"] for engine in _engines(plan)] == [3_000_000_000, 2_827_682_907]
    reasons = {o.path: o.reason for o in plan.overrides if o.path.endswith("kv_cache_memory_bytes")}
    assert all("this engine's settings profiled alone on it first" in reason for reason in reasons.values())


def test_a_plan_on_gpus_of_their_own_needs_no_profile(dev):
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, emulate_node=True)
    )
    assert plan.kv_profiles == []


def test_engines_on_gpus_of_their_own_profile_their_budgets(dev_unsized):
    plan = overrides.plan(
        dev_unsized,
        overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, emulate_node=True),
    )
    assert all("kv_cache_memory_bytes" not in engine for engine in _engines(plan))


def test_the_stages_fixed_kv_cache_is_what_a_shared_emulated_engine_runs_without_a_profile(dev):
    plan = _plan(dev, kv_cache_bytes=None)
    fixed = dev.serving.engine.extra_args["kv_cache_memory_bytes"]
    assert plan.kv_profiles == [] and [e["kv_cache_memory_bytes"] for e in _engines(plan)] == [fixed, fixed]


def test_kv_cache_bytes_wins_over_the_stages_fixed_size_and_says_so(dev):
    plan = _plan(dev, kv_cache_bytes=PROFILED_KV)
    assert [e["kv_cache_memory_bytes"] for e in _engines(plan)] == [PROFILED_KV, PROFILED_KV]
    changed = [o for o in plan.overrides if o.path.endswith("kv_cache_memory_bytes")]
    assert [o.before for o in changed] == [dev.serving.engine.extra_args["kv_cache_memory_bytes"]] * 2
    assert all("--kv-cache-bytes" in o.reason for o in changed)


@pytest.mark.parametrize("text", ["abc", "0", "-5", "1.5e9", str(2**41)])
def test_kv_cache_bytes_takes_only_a_sane_whole_number(text):
    import argparse as _argparse

    from serving_lab.rehearse.cli import _positive_bytes

    with pytest.raises(_argparse.ArgumentTypeError):
        _positive_bytes(text)


def test_sharing_one_gpu_never_caps_autoscaling_below_its_minimum(stages):
    # prod's PD on one H200: no GPU is spare, so max_replicas falls to min_replicas (it fell to 0 before)
    plan = _plan(stages["prod"])
    args = plan.serve_config["applications"][0]["args"]
    for side in SIDES:
        scaling = args[side]["deployment_config"].get("autoscaling_config")
        if scaling:
            assert scaling["max_replicas"] >= scaling["min_replicas"] >= 1


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_emulated_budget_holds_the_vision_tower(stages, stage):
    # The L4 budget is what the real model takes on the node, tower included: its weights and vLLM's profile of
    # one 4096 x 4096 image (docs/REHEARSAL.md). Nothing turns the tower off that the stage does not.
    for mode in ("pd", "colocated"):
        plan = _plan(stages[stage], mode)
        own = stages[stage].serving.engine.extra_args.get("language_model_only")
        assert [engine.get("language_model_only") for engine in _engines(plan)] == [own] * len(_engines(plan))
        assert not _changed(plan, "language_model_only")
