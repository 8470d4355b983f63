"""`python -m ops rehearse`: one-line errors with the documented exit codes, and Ray stopped and its
folder removed on every way out (a failed deploy, Ctrl-C)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from ops.__main__ import main
from serving_lab.rehearse import cli, overrides, ray_cluster
from serving_lab.rehearse.host import Gpu, Host

from ...helpers import ROOT
from .arguments import rehearse_args as _args
from .arguments import rehearse_pd

H200_PAIR = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),) * 2, efa_devices=())


class FakeHead:
    """Stands in for RayHead; records what happened to it."""

    instances: ClassVar[list[FakeHead]] = []
    fail_with: BaseException | None = None

    def __init__(self, *, num_gpus, env, temp_dir, metrics_port=8080, **kwargs):
        self.temp_dir, self.calls = Path(temp_dir), []
        (self.temp_dir / "session_latest" / "logs").mkdir(parents=True)
        (self.temp_dir / "session_latest" / "logs" / "worker-1.err").write_text(
            "Backend UCX was instantiated\nERROR something broke\n"
        )
        FakeHead.instances.append(self)

    def start(self):
        self.calls.append("start")

    def wait_for_dashboard(self):
        self.calls.append("dashboard")

    def deploy(self, config):
        self.calls.append("deploy")
        if FakeHead.fail_with:
            raise FakeHead.fail_with

    def stop(self):
        self.calls.append("stop")


@pytest.fixture
def fake_ray(monkeypatch):
    FakeHead.instances, FakeHead.fail_with = [], None
    monkeypatch.setattr(ray_cluster, "RayHead", FakeHead)
    return FakeHead


@pytest.mark.parametrize(
    "failure", [ray_cluster.RayError("PUT /api/serve/applications/: HTTP 400: bad config"), KeyboardInterrupt()]
)
def test_ray_is_stopped_and_its_folder_removed_on_failure_and_interrupt(tmp_path, dev, fake_ray, failure):
    fake_ray.fail_with = failure
    args = _args(tmp_path)
    if isinstance(failure, KeyboardInterrupt):
        with pytest.raises(cli.RehearsalInterrupted) as interrupted:
            rehearse_pd(dev, args, host=H200_PAIR, tmp_path=tmp_path)
        written = json.loads((tmp_path / "out" / "report-pd.json").read_text())
        assert written["ok"] is False and written["checks"][-1]["name"] == "rehearsal"
        assert interrupted.value.report.find("rehearsal").status == "fail"
    else:
        report, run = rehearse_pd(dev, args, host=H200_PAIR, tmp_path=tmp_path)
        assert not report.ok and run is None
        assert report.find("application RUNNING").detail == "PUT /api/serve/applications/: HTTP 400: bad config"
        assert json.loads((tmp_path / "out" / "report-pd.json").read_text())["ok"] is False
    (head,) = fake_ray.instances
    assert head.calls[-1] == "stop" and head.calls.count("stop") == 1
    assert not head.temp_dir.exists()
    # the evidence is kept even so: the plan, the NIXL lines and the error lines of the workers
    assert json.loads((tmp_path / "out" / "plan-pd.json").read_text())["mode"] == "pd"
    assert "Backend UCX was instantiated" in (tmp_path / "out" / "nixl-lines-pd.txt").read_text()
    assert "ERROR something broke" in (tmp_path / "out" / "worker-errors-pd.txt").read_text()


def _running_until_interrupted(monkeypatch, tmp_path):
    """A rehearsal whose stack comes up, passes the OpenAI checks, and is then ended by SIGTERM (a time limit)."""
    from serving_lab.rehearse import checks
    from serving_lab.rehearse import host as host_facts

    monkeypatch.setattr(host_facts, "detect", lambda: H200_PAIR)
    monkeypatch.setattr(cli, "model_folder", lambda cfg, args, work: (tmp_path, False))
    monkeypatch.setattr(ray_cluster, "wait_until_running", lambda head, app, timeout, progress: None)
    monkeypatch.setattr(ray_cluster, "install_signal_handlers", lambda: None)
    monkeypatch.setattr(checks, "openai", lambda report, base, model: report.add("GET /v1/models", "pass", "lists it"))

    def terminated(*args, **kwargs):
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(checks, "token_field_probe", terminated)


def test_an_interrupted_rehearsal_prints_and_writes_the_checks_that_finished(
    tmp_path, dev, fake_ray, monkeypatch, capsys
):
    _running_until_interrupted(monkeypatch, tmp_path)
    assert cli.run(_args(tmp_path, mode="pd")) == 130
    out, err = capsys.readouterr()
    assert "application RUNNING" in out and "GET /v1/models" in out
    assert "interrupted 0 s after ray start: the checks above are those that finished" in out
    assert "FAILED: 2 passed, 1 failed, 1 warnings" in out  # the warning: the fake engines logged no memory
    assert err.strip().splitlines()[-1] == "rehearse: interrupted; Ray stopped"
    written = json.loads((tmp_path / "out" / "dev" / "report-pd.json").read_text())
    assert [check["name"] for check in written["checks"]] == [
        "application RUNNING",
        "GET /v1/models",
        "engine memory",
        "rehearsal",
    ]
    (head,) = fake_ray.instances
    assert head.calls[-1] == "stop"


def test_unknown_profile_exits_2_with_one_line_naming_the_stage_s_profiles(capsys):
    assert main(["rehearse", "--stage", "dev", "--bench", "--profile", "chatt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "rehearse: --profile: benchmark.profiles: no profile 'chatt' in stage dev (allowed: chat, long-prompt)"
    ]


@pytest.mark.parametrize(
    "levels, error",
    [
        ("1,x", "x is not an integer (allowed: an integer from 1 to 4096) in 1,x, e.g. 1,16,64"),
        ("1,,2", "'' is not an integer (allowed: an integer from 1 to 4096) in 1,,2, e.g. 1,16,64"),
        ("0", "0 (allowed: an integer from 1 to 4096) in 0, e.g. 1,16,64"),
        ("99999999999", "99999999999 (allowed: an integer from 1 to 4096) in 99999999999, e.g. 1,16,64"),
        ("\uff11", "\uff11 is not an integer (allowed: an integer from 1 to 4096) in \uff11, e.g. 1,16,64"),
        ("16,1", "16,1: list each level once, in ascending order (e.g. 1,16,64)"),
        ("1,1", "1,1: list each level once, in ascending order (e.g. 1,16,64)"),
    ],
)
def test_bad_levels_are_argparses_one_line_exit_2_before_the_host_is_read(levels, error, capsys, monkeypatch):
    monkeypatch.setattr(cli.host_facts, "detect", lambda *a, **k: pytest.fail("the host was read"))
    with pytest.raises(SystemExit) as info:
        main(["rehearse", "--stage", "dev", "--levels", levels])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: argument --levels: {error}")


def test_an_unknown_stage_exits_2(capsys):
    assert main(["rehearse", "--stage", "nope"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_host_without_nvidia_smi_exits_1_with_the_fix(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["rehearse", "--stage", "dev"]) == 1
    assert capsys.readouterr().err.strip() == (
        "rehearse: nvidia-smi not found: the rehearsal needs a Linux host with NVIDIA GPUs and drivers"
    )


def test_a_model_without_a_committed_config_needs_weights(tmp_path, dev):
    cfg = dev.model_copy(
        update={
            "serving": dev.serving.model_copy(
                update={"model": dev.serving.model.model_copy(update={"source": "meta-llama/Llama-3.1-8B"})}
            )
        }
    )
    with pytest.raises(
        cli.RehearsalError,
        match=r"config/dev.yaml: serving.model.source: no committed config "
        r"for 'meta-llama/Llama-3.1-8B' .* pass --weights DIR",
    ) as error:
        cli.model_folder(cfg, _args(tmp_path), tmp_path)
    assert error.value.code == 2


def test_the_larger_model_example_rehearses_on_its_own_committed_config(tmp_path, larger):
    folder, real = cli.model_folder(larger, _args(tmp_path), tmp_path)
    assert not real and (folder / "config.json").read_bytes() == cli.MODEL_CONFIGS["Qwen/Qwen3.5-27B"].read_bytes()
    assert larger.serving.model.source == "Qwen/Qwen3.5-27B"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--weights", "{tmp}"], "rehearse: --weights: {tmp} has no config.json (a Hugging Face model folder)"),
        (
            ["--weights", "{tmp}", "--full-attention"],
            "rehearse: --full-attention: builds dummy weights of a stand-in; drop --weights",
        ),
    ],
)
def test_a_weights_folder_that_cannot_serve_is_refused_before_the_host_is_read(
    tmp_path, argv, message, capsys, monkeypatch
):
    monkeypatch.setattr(cli.host_facts, "detect", lambda *a, **k: pytest.fail("the host was read"))
    assert main(["rehearse", "--stage", "dev", *(part.format(tmp=tmp_path) for part in argv)]) == 2
    assert capsys.readouterr().err.strip() == message.format(tmp=tmp_path)


def test_the_full_attention_stand_in_is_built_beside_the_models_folder(tmp_path, dev):
    folder, real = cli.model_folder(dev, _args(tmp_path, full_attention=True), tmp_path)
    assert (folder.name, real) == ("model-full-attention", False)
    assert '"Qwen3ForCausalLM"' in (folder / "config.json").read_text()


@pytest.mark.parametrize("given", ["0", "-0", "0.5"])
def test_a_level_time_bound_is_at_least_a_second_in_one_check(capsys, given):
    # its range was 0 to 1e9 (the default for a plain number), then a second check refused 0
    with pytest.raises(SystemExit) as exited:
        main(["rehearse", "--stage", "dev", "--bench", "--level-seconds", given])
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"python -m ops rehearse: error: argument --level-seconds: {given} (allowed: a number from 1 to 1e+09 seconds)"
    ]


def test_the_benchmark_gets_the_chosen_profiles_levels_and_time_bound(tmp_path, dev, monkeypatch):
    from serving_lab.bench import aiperf, runner
    from serving_lab.rehearse import overrides

    seen = {}

    def run_stage(cfg, **kwargs):
        seen.update(kwargs, mode=cfg.serving.mode)
        return None, tmp_path / "run.json"

    monkeypatch.setattr(runner, "run_stage", run_stage)
    monkeypatch.setattr(aiperf, "find_executable", lambda given: "/bin/aiperf")
    model = tmp_path / "model"
    model.mkdir()
    args = _args(
        tmp_path, bench=True, profile=["long-prompt"], levels=[1, 16], level_seconds=15.0, requests_per_stream=64
    )
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="colocated", host=H200_PAIR, model_dir=model, real_weights=False)
    )
    _, path = cli._bench(
        dev,
        args,
        mode="colocated",
        host=H200_PAIR,
        plan=plan,
        model=model,
        out=tmp_path,
        deadline=None,
        say=lambda line: None,
    )
    assert path == tmp_path / "run.json"
    assert seen["profile_names"] == ["long-prompt"] and seen["mode"] == "colocated"
    adjust = seen["adjust"]
    assert (adjust.levels, adjust.level_seconds, adjust.requests_per_stream) == ([1, 16], 15.0, 64)
    assert adjust.request_rates is None  # no --request-rates: the profiles' own (none in dev)


def test_request_rates_reach_the_benchmark_as_an_open_loop_sweep(tmp_path, dev, monkeypatch):
    from serving_lab.bench import aiperf, runner
    from serving_lab.rehearse import overrides

    seen = {}
    monkeypatch.setattr(
        runner, "run_stage", lambda cfg, **kwargs: (seen.update(kwargs), (None, tmp_path / "r.json"))[1]
    )
    monkeypatch.setattr(aiperf, "find_executable", lambda given: "/bin/aiperf")
    model = tmp_path / "model"
    model.mkdir()
    args = _args(tmp_path, bench=True, request_rates=[0.5, 2.0])
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=model, real_weights=False))
    cli._bench(
        dev, args, mode="pd", host=H200_PAIR, plan=plan, model=model, out=tmp_path, deadline=None, say=lambda _: None
    )
    assert seen["adjust"].request_rates == [0.5, 2.0]
    assert seen["adjust"].recorded["rehearsal"]["request_rates"] == [0.5, 2.0]


@pytest.mark.parametrize(("ingress", "label"), [(None, "pd-haproxy"), ("serve_proxy", "pd")])
def test_a_benchmark_through_haproxy_is_named_and_recorded_so(tmp_path, dev, monkeypatch, ingress, label):
    from serving_lab.bench import aiperf, runner
    from serving_lab.rehearse import overrides

    seen = {}
    monkeypatch.setattr(
        runner, "run_stage", lambda cfg, **kwargs: (seen.update(kwargs, cfg=cfg), (None, tmp_path / "r.json"))[1]
    )
    monkeypatch.setattr(aiperf, "find_executable", lambda given: "/bin/aiperf")
    args = _args(tmp_path, bench=True, serve_ingress=ingress)
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=tmp_path, real_weights=False, serve_ingress=ingress),
    )
    cli._bench(
        dev, args, mode="pd", host=H200_PAIR, plan=plan, model=tmp_path, out=tmp_path, deadline=None, say=lambda _: None
    )
    assert seen["label"] == label
    assert seen["cfg"].serving.serve_ingress == (ingress or "haproxy")


@pytest.mark.parametrize("text", ["0", "2,1", "fast", "-1"])
def test_a_bad_request_rate_is_one_line_and_exit_2(text, capsys):
    from ops.__main__ import main

    with pytest.raises(SystemExit) as info:
        main(["rehearse", "--stage", "dev", "--request-rates", text])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert "error: argument --request-rates: " in err[-1]  # argparse's usage lines, then the one error line


def test_the_rate_floor_is_the_stage_s_labelled_unless_the_host_s_is_stated(dev):
    assert cli.rate_floor(dev, None, H200_PAIR) == (
        6.25,
        "6.25 Gbps, stage dev's (config/derived.py kv_transfer_floor_gbps; this host has no EFA)",
    )
    assert cli.rate_floor(dev, 2.5, H200_PAIR) == (2.5, "2.5 Gbps, this host's (--kv-floor-gbps)")


@pytest.mark.parametrize(
    "fixture, transport, efa_host, ok",
    [
        ("ucx.log", overrides.Transport(), False, True),  # the plan's UCX on a host without EFA
        ("tcp.log", overrides.Transport(nixl_backend="LIBFABRIC"), False, True),  # --nixl-backend LIBFABRIC kept
        ("tcp.log", overrides.Transport(), False, False),  # UCX planned, libfabric ran
        ("ucx.log", overrides.Transport(nixl_backend="LIBFABRIC"), False, False),
        ("tcp.log", overrides.Transport(), True, False),  # a host with EFA is held to EFA
        ("efa.log", overrides.Transport(), True, True),
    ],
)
def test_the_rate_check_holds_the_workers_to_the_backend_this_host_can_run(fixture, transport, efa_host, ok):
    host = Host(gpus=H200_PAIR.gpus, efa_devices=("rdmap0s6",) if efa_host else ())
    logs = {"worker-1.err": (ROOT / "tests" / "ops" / "fixtures" / fixture).read_text()}
    assert cli.rate_backend(logs, transport, host).ok is ok


@pytest.mark.parametrize("text", ["0", "fast", "nan", "4000"])
def test_a_bad_kv_floor_is_one_line_and_exit_2(text, capsys):
    with pytest.raises(SystemExit) as info:
        main(["rehearse", "--stage", "dev", "--kv-floor-gbps", text])
    assert info.value.code == 2
    assert "error: argument --kv-floor-gbps: " in capsys.readouterr().err.strip().splitlines()[-1]


def _ttft_rounds_only(monkeypatch, tmp_path, stream_chat) -> None:
    """A rehearsal whose stack comes up and runs only the TTFT rounds, against `stream_chat`, without waiting."""
    from serving_lab.rehearse import checks, phases
    from serving_lab.rehearse import host as host_facts

    monkeypatch.setattr(checks, "stream_chat", stream_chat)
    monkeypatch.setattr(phases, "SPAN_WAIT_S", 0)
    monkeypatch.setattr(host_facts, "detect", lambda: H200_PAIR)
    monkeypatch.setattr(cli, "model_folder", lambda cfg, args, work: (tmp_path, False))
    monkeypatch.setattr(cli, "_metrics_text", lambda: "")
    monkeypatch.setattr(cli, "_kv_checks", lambda rehearsal, report, base: None)
    monkeypatch.setattr(ray_cluster, "wait_until_running", lambda head, app, timeout, progress: None)
    monkeypatch.setattr(ray_cluster, "install_signal_handlers", lambda: None)
    monkeypatch.setattr(checks, "openai", lambda report, base, model: None)


def test_ttft_phases_joins_each_request_with_the_engines_spans_and_serves_lines(tmp_path, dev, fake_ray, monkeypatch):
    from serving_lab.rehearse import traces

    from .otlp import VllmSpan, export

    receivers = []

    class Recorded(traces.Receiver):  # on a free port, and kept for the asserts
        def __init__(self):
            super().__init__(port=0)
            receivers.append(self)

    def engines(base, model, *, request_id, **kwargs):
        """A PD request as the engines and Serve would log it: both engines' spans, the three access lines."""
        (head,) = fake_ray.instances
        export(
            f"http://127.0.0.1:{receivers[0].port}/v1/traces",
            [
                VllmSpan(request_id, 10**18, 10**18 + 10**8, queue=0.002, prefill=0.06, decode=0, tokens=1, ttft=0.07),
                VllmSpan(
                    request_id, 10**18, 10**18 + 10**9, queue=0.03, prefill=0.012, decode=0.5, tokens=16, ttft=0.05
                ),
            ],
        )
        lines = [
            f"INFO 2026-12-01 12:35:21,100 llm_OpenAiIngress c0p1dglx {request_id} -- POST /v1/chat/completions 200 700.0ms",
            f"INFO 2026-12-01 12:35:20,500 llm_Prefill:qwen3_5-9b qah0pe1k {request_id} -- CALL chat OK 90.0ms",
        ]
        (head.temp_dir / "session_latest" / "logs" / f"worker-{request_id}.err").write_text("\n".join(lines) + "\n")
        return {"ttft_s": 0.18, "chunks": 16}

    monkeypatch.setattr(traces, "Receiver", Recorded)
    _ttft_rounds_only(monkeypatch, tmp_path, engines)
    cli.run(_args(tmp_path, mode="pd", ttft_phases=2))
    rounds = json.loads((tmp_path / "out" / "dev" / "ttft-phases-pd.json").read_text())
    assert [len(r["per_request"]["rows"]) for r in rounds] == [2, 2]  # one stream at a time, then 16
    row = rounds[0]["per_request"]["rows"][0]
    assert {name: row[name] for name in row if name != "request_id"} == {
        "prompt_tokens": 750,
        "client_ttft_s": 0.18,
        "prefill_queue_s": 0.002,
        "prefill_compute_s": 0.06,
        "decode_queue_s": 0.03,
        "decode_first_step_s": 0.012,
        "outside_engines_s": 0.076,
        "serve.ingress_s": 0.7,
        "serve.prefill_s": 0.09,
        "serve.prefill_start_s": 0.01,  # 20.5 - 0.09 - (21.1 - 0.7)
    }
    plan = json.loads((tmp_path / "out" / "dev" / "plan-pd.json").read_text())
    assert plan["serve_config"]["applications"][0]["args"]["decode_config"]["engine_kwargs"]["otlp_traces_endpoint"]
    (receiver,) = receivers
    assert not receiver.running  # stopped with Ray


def test_ttft_phases_states_each_round_over_the_gpus_floors(tmp_path, dev, fake_ray, monkeypatch):
    import shutil

    from serving_lab.rehearse import checks, traces

    latencies = {"gen_ai.latency.time_in_queue": 0.001, "gen_ai.latency.time_in_model_prefill": 0.02}
    counted = {"gen_ai.usage.prompt_tokens": 750, "gen_ai.usage.completion_tokens": 16, **latencies}

    def joined(client):  # the engine's span of each request, as the receiver would hold it
        spans = [traces.Span(request_id, 0, 1, counted) for request_id in client]
        return traces.PerRequest(traces.rows(spans, client, mode="colocated"), len(spans))

    _ttft_rounds_only(monkeypatch, tmp_path, lambda *a, **k: {"ttft_s": 0.1, "chunks": 16})
    shutil.copy(ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json", tmp_path / "config.json")
    monkeypatch.setattr(checks, "engine_memory", lambda report, logs, app: [{"weights_gib": 16.8}])
    monkeypatch.setattr(cli, "_per_request", lambda rehearsal, receiver: joined)
    cli.run(_args(tmp_path, mode="colocated", ttft_phases=2))
    rounds = json.loads((tmp_path / "out" / "dev" / "ttft-phases-colocated.json").read_text())
    floors = [found["floors"] for found in rounds]
    assert floors[0] == floors[1]
    assert floors[0]["prompt_tokens"] == 750
    prefill = max(floors[0]["prefill_compute_s"], floors[0]["weight_read_s"])
    assert floors[0]["multiples"] == {
        "client_ttft_s": round(0.1 / prefill, 2),
        "prefill_compute_s": round(0.02 / prefill, 2),
    }


def test_a_span_receiver_that_cannot_start_leaves_the_histograms_and_one_warning(tmp_path, dev, fake_ray, monkeypatch):
    from serving_lab.rehearse import traces

    def taken(self):
        raise traces.TraceError("cannot listen on 127.0.0.1:14318: Address already in use")

    monkeypatch.setattr(traces.Receiver, "start", taken)
    _ttft_rounds_only(monkeypatch, tmp_path, lambda *a, **k: {"ttft_s": 0.18, "chunks": 16})
    cli.run(_args(tmp_path, mode="pd", ttft_phases=2))
    report = json.loads((tmp_path / "out" / "dev" / "report-pd.json").read_text())
    (warning,) = [check for check in report["checks"] if check["name"] == "TTFT per request"]
    assert warning["detail"] == (
        "the span receiver did not start: cannot listen on 127.0.0.1:14318: Address already in use"
    )
    rounds = json.loads((tmp_path / "out" / "dev" / "ttft-phases-pd.json").read_text())
    assert [r["client_ttft_s"] for r in rounds] == [[0.18, 0.18], [0.18, 0.18]]
    assert not [r for r in rounds if "per_request" in r]


# -- --serve-ingress ----------------------------------------------------------------------------------------------


def _ingress_plan(dev, tmp_path, **changed):
    args = _args(tmp_path, **changed)
    return cli._plan(
        dev,
        args,
        mode="pd",
        host=H200_PAIR,
        model=tmp_path,
        real_weights=False,
        out=tmp_path,
        say=lambda _: None,
        kv_found=None,
    )


def test_serve_ingress_serve_proxy_reaches_the_plan(dev, tmp_path):
    plan = _ingress_plan(dev, tmp_path, serve_ingress="serve_proxy")
    assert "RAY_SERVE_ENABLE_HA_PROXY" not in plan.env
    assert ("serving.serve_ingress", "serve_proxy") in [(o.path, o.after) for o in plan.overrides]


def test_stream_batching_ms_reaches_the_plan_from_the_command_line(dev, tmp_path):
    argv = ["rehearse", "--stage", "dev", "--stream-batching-ms", "0"]
    from ops.__main__ import _parser

    plan = _ingress_plan(dev, tmp_path, stream_batching_ms=_parser(argv=argv).parse_args(argv).stream_batching_ms)
    assert ("serving.stream_batching_ms", None, 0) in [(o.path, o.before, o.after) for o in plan.overrides]


@pytest.mark.parametrize("text", ["-1", "1001", "5.5", "nan", ""])
def test_a_bad_stream_batching_is_one_line_and_exit_2(text, capsys):
    with pytest.raises(SystemExit) as info:
        main(["rehearse", "--stage", "dev", "--stream-batching-ms", text])
    assert info.value.code == 2
    assert "error: argument --stream-batching-ms: " in capsys.readouterr().err.strip().splitlines()[-1]


def test_serve_ingress_haproxy_without_a_binary_is_refused_before_ray_starts(dev, tmp_path, monkeypatch):
    monkeypatch.setattr(ray_cluster, "haproxy_binary", lambda env: None)
    with pytest.raises(cli.RehearsalError, match="Serve finds no HAProxy binary here") as refused:
        _ingress_plan(dev, tmp_path, serve_ingress="haproxy")
    assert refused.value.code == 2


def test_serves_own_proxy_needs_no_haproxy_binary(dev, tmp_path, monkeypatch):
    monkeypatch.setattr(ray_cluster, "haproxy_binary", lambda env: None)
    assert "RAY_SERVE_ENABLE_HA_PROXY" not in _ingress_plan(dev, tmp_path, serve_ingress="serve_proxy").env


@pytest.mark.parametrize(
    "given, named",
    [
        (["--levels", "1,16"], "--levels: only --bench reads it"),
        (["--profile", "chat", "--min-requests", "10"], "--profile, --min-requests: only --bench reads them"),
        (["--calibrate"], "--calibrate: only --bench reads it"),
    ],
)
def test_an_option_only_the_benchmark_reads_is_refused_without_bench(capsys, monkeypatch, given, named):
    monkeypatch.setattr(cli.host_facts, "detect", lambda *a, **k: pytest.fail("the host was read"))
    assert main(["rehearse", "--stage", "dev", *given]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"rehearse: {named}"]


def test_every_option_whose_help_says_bench_is_one_only_the_benchmark_reads():
    import argparse

    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    (command,) = parser._subparsers._group_actions[0].choices.values()
    said = {a.dest for a in command._actions if (a.help or "").startswith("--bench:")}
    assert said == set(cli.BENCH_ONLY)


def test_an_engine_variable_given_twice_is_refused_naming_it(capsys, monkeypatch):
    # which of the two values won was argparse's order, unsaid
    monkeypatch.setattr(cli.host_facts, "detect", lambda *a, **k: pytest.fail("the host was read"))
    argv = ["rehearse", "--stage", "dev", "--engine-env", "A=1", "--engine-env", "B=2", "--engine-env", "A=2"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == "rehearse: --engine-env: A given more than once (give each variable once)"


def test_a_cuda_graph_arm_outside_the_grammar_is_argparses_one_line(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["rehearse", "--stage", "dev", "--cuda-graphs", "vllm-default@0"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip().endswith("error: argument --cuda-graphs: vllm-default@0: @N from 1 to 8192")


def test_the_breakable_arm_is_refused_for_a_gated_deltanet_model_before_the_host_is_read(capsys, monkeypatch):
    # measured: every prefill it graphed computed other logprobs (evidence/2026-12-05-h200-graph-arms)
    monkeypatch.setattr(cli.host_facts, "detect", lambda *a, **k: pytest.fail("the host was read"))
    assert main(["rehearse", "--stage", "dev", "--cuda-graphs", "breakable@512"]) == 2
    said = capsys.readouterr().err.strip()
    assert said.startswith("rehearse: --cuda-graphs breakable@512: Qwen/Qwen3.5-9B's Gated DeltaNet layers")
    assert len(said.splitlines()) == 1
