"""vLLM's own memory figures per engine, read from the workers' logs: on the real worker logs of the H200
runs committed in evidence/ (exact figures), on logs without them (None, no crash), and in the
rehearsal's report and results."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clients.report import Report
from serving_lab.rehearse import checks, cli, engine_memory, ray_cluster
from serving_lab.rehearse.host import Gpu, Host

from ...helpers import ROOT
from ..bench.runs import make_run
from .arguments import rehearse_args, rehearse_pd

BENCH = ROOT / "evidence" / "2026-11-30-h200x2-bench"
ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())


def committed_logs(path: Path) -> dict[str, str]:
    """A committed worker-tails-*.txt back into {file name: text} (its `== <path>` headers)."""
    logs: dict[str, str] = {}
    name = None
    for line in path.read_text().splitlines():
        if line.startswith("== "):
            name = line[3:].rsplit("/", 1)[-1]
            logs[name] = ""
        elif name is not None:
            logs[name] += line + "\n"
    return logs


# vLLM 0.26's lines as committed (evidence/2026-11-30-h200x2-bench/worker-tails-pd-3.txt and
# worker-tails-colocated-3.txt), the forwarded ones with Ray's colour codes.
REAL_LINES = [
    (
        "(Worker pid=5584) INFO 11-30 22:31:31 [gpu_model_runner.py:5347] Model loading took 16.8 GiB memory and "
        "0.278049 seconds"
    ),
    (
        "(EngineCore pid=5324) \x1b[36m(RayWorkerProc pid=5522)\x1b[0m (Worker pid=5522) INFO 11-30 22:32:44 "
        "[gpu_worker.py:560] Available KV cache memory: 105.24 GiB"
    ),
    "(EngineCore pid=5324) INFO 11-30 22:32:44 [kv_cache_utils.py:2177] GPU KV cache size: 2,431,906 tokens",
    (
        "(EngineCore pid=5324) INFO 11-30 22:32:44 [kv_cache_utils.py:2178] Maximum concurrency for 4,096 tokens per "
        "request: 593.73x"
    ),
    (
        "(Worker pid=4010) INFO 11-30 22:54:06 [gpu_worker.py:857] Free memory on device (139.29/139.8 GiB) on startup. "
        "Desired GPU memory utilization is (0.9, 125.82 GiB). Actual usage is 16.8 GiB for weight, 3.55 GiB for peak "
        "activation, 0.22 GiB for non-torch memory, and 0.0 GiB for CUDAGraph memory."
    ),
]


def test_the_committed_lines_give_vllms_exact_figures():
    for line in REAL_LINES:  # each line is in the committed logs, verbatim
        plain = line.replace("\x1b[36m", "").replace("\x1b[0m", "")
        assert any(
            plain in text.replace("\x1b[36m", "").replace("\x1b[0m", "")
            for f in BENCH.glob("worker-tails-*.txt")
            for text in [f.read_text()]
        ), line
    assert engine_memory.figures("\n".join(REAL_LINES)) == {
        "weights_gib": 16.8,
        "kv_cache_gib": 105.24,
        "kv_cache_source": "profiled",
        "kv_cache_tokens": 2431906,
        "tokens_per_request": 4096,
        "max_concurrency": 593.73,
        "gpu_memory_utilization": 0.9,
        "requested_gib": 125.82,
        "model_load_seconds": 0.278049,
    }


def test_the_lines_vllm_writes_where_the_committed_runs_wrote_none():
    # The committed runs are eager (enforce_eager: true: no graphs) with a profiled KV cache; these lines are
    # vLLM 0.26's format strings filled in (vllm/v1/worker/gpu_model_runner.py "Graph capturing finished in
    # %.0f secs, took %.2f GiB"; vllm/v1/worker/gpu/model_runner.py "Model loading took %s GiB and %.6f
    # seconds"; vllm/v1/worker/gpu_worker.py, kv_cache_memory_bytes set).
    text = (
        "INFO [gpu_model_runner.py:6845] Graph capturing finished in 7 secs, took 0.45 GiB\n"
        "INFO [model_runner.py:306] Model loading took 16.8 GiB and 0.412345 seconds\n"
        "INFO [gpu_worker.py:478] Initial free memory 139.29 GiB, reserved 20.06 GiB memory for KV Cache as "
        "specified by kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
        "gpu_memory_utilization config.\n"
    )
    assert engine_memory.figures(text) == {
        "cuda_graph_seconds": 7.0,
        "cuda_graph_gib": 0.45,
        "weights_gib": 16.8,
        "kv_cache_gib": 20.06,
        "kv_cache_source": "kv_cache_memory_bytes",
        "model_load_seconds": 0.412345,
    }


def test_each_pd_engine_of_a_committed_run_gets_its_own_figures():
    found = engine_memory.engines(committed_logs(BENCH / "worker-tails-pd-3.txt"))
    assert [(e.engine, e.role) for e in found] == [
        ("Prefill:qwen3_5-9b 4g25mv6m", "prefill"),
        ("Decode:qwen3_5-9b g61e8ufy", "decode"),
    ]
    prefill, decode = found
    assert prefill == engine_memory.EngineMemory(
        engine="Prefill:qwen3_5-9b 4g25mv6m",
        role="prefill",
        weights_gib=16.8,
        gpu_memory_utilization=0.9,
        requested_gib=125.82,
        kv_cache_gib=105.24,
        kv_cache_source="profiled",
        kv_cache_tokens=2431906,
        max_concurrency=593.73,
        tokens_per_request=4096,
        model_load_seconds=0.341933,
        engine_init_seconds=85.14,
    )  # no CUDA graphs and no torch.compile: enforce_eager
    assert prefill.complete
    # the decode replica's committed tail starts after its KV cache size lines: the weights and KV memory
    # come from its worker's own file (RayWorkerProc pid=5584), the token figures are not there
    assert (decode.weights_gib, decode.kv_cache_gib, decode.kv_cache_tokens, decode.max_concurrency) == (
        16.8,
        105.24,
        None,
        None,
    )
    assert not decode.complete


def test_colocated_replicas_are_told_apart():
    found = engine_memory.engines(committed_logs(BENCH / "worker-tails-colocated-3.txt"))
    assert [(e.engine, e.role, e.kv_cache_tokens) for e in found] == [
        ("LLMServer:qwen3_5-9b cx6nd4kg", "replica", 2431906),
        ("LLMServer:qwen3_5-9b ss1lemxy", "replica", 2431906),
    ]


def test_a_log_without_the_lines_gives_none_and_no_crash():
    logs = {
        "worker-aa-01000000-11.out": ":actor_name:ServeReplica:llm:Prefill:qwen3_5-9b\n"
        "(EngineCore pid=12) INFO Initializing a V1 LLM engine (v0.26.0)\n",
        "worker-aa-01000000-11.err": "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out\n",
        "worker-bb-ffffffff-9.out": ":actor_name:ServeReplica:llm:OpenAiIngress\n",
    }
    (engine,) = engine_memory.engines(logs)
    assert engine == engine_memory.EngineMemory(engine="Prefill:qwen3_5-9b pid 11", role="prefill")
    assert engine.summary() == "weights ?, KV cache ?, ? tokens, concurrency ?, CUDA graphs: none logged"
    assert not engine.complete
    assert engine_memory.engines({}) == [] and engine_memory.figures("") == {}
    assert engine_memory.engines({"worker-x.out": "GPU KV cache size: not a number tokens\n"}) == []


def test_the_report_gets_one_entry_per_engine():
    report = Report("rehearse", "dev")
    memory = checks.engine_memory(report, committed_logs(BENCH / "worker-tails-pd-3.txt"))
    prefill, prefill_startup, decode, _ = report.checks
    assert (prefill_startup.name, prefill_startup.status) == ("engine start-up (Prefill:qwen3_5-9b 4g25mv6m)", "pass")
    assert prefill_startup.detail.endswith("engine init after loading 85.1 s")  # eager: no compile, no graphs
    assert (prefill.name, prefill.status) == ("engine memory (Prefill:qwen3_5-9b 4g25mv6m)", "pass")
    assert prefill.detail == (
        "weights 16.8 GiB, budget 0.9 = 125.82 GiB, KV cache 105.24 GiB, 2,431,906 tokens, "
        "593.73x requests of 4,096 tokens, CUDA graphs: none logged"
    )
    assert prefill.data["kv_cache_tokens"] == 2431906 and prefill.data["weights_gib"] == 16.8
    assert (decode.name, decode.status) == ("engine memory (Decode:qwen3_5-9b g61e8ufy)", "warn")
    assert [m["engine"] for m in memory] == ["Prefill:qwen3_5-9b 4g25mv6m", "Decode:qwen3_5-9b g61e8ufy"]
    empty = Report("rehearse", "dev")
    assert checks.engine_memory(empty, {}) == [] and [(c.name, c.status) for c in empty.checks] == [
        ("engine memory", "warn")
    ]


class FakeHead:
    """RayHead with the committed worker logs of the PD run in its log folder."""

    def __init__(self, *, num_gpus, env, temp_dir, metrics_port=8080, **kwargs):
        self.temp_dir = Path(temp_dir)
        logs = self.temp_dir / "session_latest" / "logs"
        logs.mkdir(parents=True)
        for name, text in committed_logs(BENCH / "worker-tails-pd-3.txt").items():
            (logs / name).write_text(text)

    def start(self):
        pass

    def wait_for_dashboard(self):
        pass

    def deploy(self, config):
        pass

    def stop(self):
        pass


@pytest.fixture
def fake_stack(monkeypatch):
    monkeypatch.setattr(ray_cluster, "RayHead", FakeHead)
    monkeypatch.setattr(ray_cluster, "wait_until_running", lambda *args, **kwargs: None)
    monkeypatch.setattr(checks, "openai", lambda report, base, model: report.add("GET /v1/models", "pass", "ok"))
    monkeypatch.setattr(checks, "token_field_probe", lambda report, base, model: None)
    monkeypatch.setattr(checks, "nixl_transport", lambda report, logs, expect_efa: None)
    monkeypatch.setattr(checks, "kv_transfer_rate", lambda *args, **kwargs: None)
    monkeypatch.setattr(cli, "_scrape_metrics", lambda path, say: None)


def test_the_rehearsal_reports_and_records_each_engines_memory(tmp_path, dev, fake_stack, monkeypatch):
    seen = {}

    def bench(*args, **kwargs):
        seen.update(kwargs)
        return make_run("pd", {"chat": {1: (300.0, 6.0, 1900.0)}}), tmp_path / "run.json"

    monkeypatch.setattr(cli, "_bench", bench)
    lines: list[str] = []
    (tmp_path / "model").mkdir()
    shutil.copy(ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json", tmp_path / "model" / "config.json")
    _, run = rehearse_pd(dev, _args(tmp_path, bench=True), host=ONE_H200, tmp_path=tmp_path, say=lines.append)
    assert run == tmp_path / "run.json"
    written = json.loads((tmp_path / "out" / "report-pd.json").read_text())
    assert {"name": "benchmark", "status": "pass"}.items() <= written["checks"][-1].items()
    # the level's TTFT (300 ms) and ITL (6 ms) medians over the H200's floors at the chat profile's 256 tokens
    floor = written["checks"][-2]
    assert floor["name"] == "benchmark over the GPU's floors"
    assert floor["detail"] == "chat at 1: TTFT 83x, ITL 1.8x"  # floors 3.61 ms (2 x 6.99e9 x 256 / 989.5e12) and 3.33
    entries = {c["name"]: c for c in written["checks"] if c["name"].startswith("engine memory")}
    assert list(entries) == [
        "engine memory (Prefill:qwen3_5-9b 4g25mv6m)",
        "engine memory (Decode:qwen3_5-9b g61e8ufy)",
    ]
    assert entries["engine memory (Prefill:qwen3_5-9b 4g25mv6m)"]["data"]["kv_cache_gib"] == 105.24
    # the same figures go to the benchmark's results (settings.rehearsal.engine_memory)
    assert [m["engine"] for m in seen["engine_memory"]] == ["Prefill:qwen3_5-9b 4g25mv6m", "Decode:qwen3_5-9b g61e8ufy"]
    assert "  label: L4 memory budget on an H200: memory emulated, speed is the H200's" in lines


def test_a_stack_that_never_came_up_still_reports_what_the_engines_logged(tmp_path, dev, fake_stack, monkeypatch):
    def fail(*args, **kwargs):
        raise ray_cluster.RayError("application 'llm' DEPLOY_FAILED")

    monkeypatch.setattr(ray_cluster, "wait_until_running", fail)
    report, run = rehearse_pd(dev, _args(tmp_path), host=ONE_H200, tmp_path=tmp_path)
    assert not report.ok and run is None
    names = [c["name"] for c in json.loads((tmp_path / "out" / "report-pd.json").read_text())["checks"]]
    assert names == [
        "application RUNNING",
        "engine memory (Prefill:qwen3_5-9b 4g25mv6m)",
        "engine start-up (Prefill:qwen3_5-9b 4g25mv6m)",
        "engine memory (Decode:qwen3_5-9b g61e8ufy)",
        "engine start-up (Decode:qwen3_5-9b g61e8ufy)",
    ]


def _args(tmp_path, **changed):
    """An emulated rehearsal on one shared GPU, its KV cache fixed at one engine's profiled figure."""
    return rehearse_args(tmp_path, share_gpus=True, emulate_node=True, kv_cache_bytes=2113009755, **changed)


def test_a_negative_graph_figure_is_labelled_not_a_measurement():
    # seen on an H200 with two engines on one GPU: "CUDA graphs -1.33 GiB" printed as a fact
    line = "Graph capturing finished in 7 secs, took -1.33 GiB"
    memory = engine_memory.EngineMemory(engine="Prefill:m x", role="prefill", **engine_memory.figures(line))
    assert memory.cuda_graph_gib == -1.33
    assert "CUDA graphs -1.33 GiB (not a measurement: another process on the GPU freed memory" in memory.summary()
    assert (
        "not a measurement" not in engine_memory.EngineMemory(engine="e", role="decode", cuda_graph_gib=0.45).summary()
    )


def test_where_an_engines_start_up_went_from_vllms_own_lines():
    # vLLM 0.26's format strings filled in: vllm/compilation/monitor.py ("torch.compile took %.2f s in total",
    # "Initial profiling/warmup run took %.2f s"), vllm/v1/engine/core.py ("init engine ... took %.2f s
    # (compilation: %.2f s)"), vllm/compilation/backends.py ("Directly load the compiled graph(s) ...").
    text = (
        "INFO [gpu_model_runner.py:5348] Model loading took 16.8 GiB memory and 3.250000 seconds\n"
        "INFO [backends.py:293] Directly load the compiled graph(s) for compile range (1, 2048) from the cache\n"
        "INFO [monitor.py:48] torch.compile took 4.12 s in total\n"
        "INFO [monitor.py:82] Initial profiling/warmup run took 1.75 s\n"
        "INFO [gpu_model_runner.py:6845] Graph capturing finished in 6 secs, took 0.45 GiB\n"
        "INFO [core.py:341] init engine (profile, create kv cache, warmup model) took 21.30 s (compilation: 4.12 s)\n"
    )
    found = engine_memory.figures(text)
    assert {
        k: found[k] for k in ("model_load_seconds", "compile_seconds", "warmup_seconds", "engine_init_seconds")
    } == {
        "model_load_seconds": 3.25,
        "compile_seconds": 4.12,
        "warmup_seconds": 1.75,
        "engine_init_seconds": 21.3,
    }
    engine = engine_memory.EngineMemory(engine="Prefill:m x", role="prefill", **found)
    assert engine.startup() == (
        "model load 3.2 s, torch.compile 4.1 s (from the cache), profile/warm-up 1.8 s, CUDA graphs 6.0 s, "
        "engine init after loading 21.3 s"
    )


def test_an_engine_that_logged_no_start_up_lines_says_so():
    engine = engine_memory.EngineMemory(engine="Decode:m y", role="decode")
    assert engine.startup() == (
        "model load not logged, torch.compile not logged, profile/warm-up not logged, CUDA graphs not logged, "
        "engine init after loading not logged"
    )
