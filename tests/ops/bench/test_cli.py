"""`python -m ops bench` end to end against the fake server: a stage run saved as JSON with what was
measured and how, two runs of different modes compared into a report whose verdicts follow the injected
latencies, the port-forward path, and bad input (one line, exit 2)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ops.__main__ import main
from ops.bench import results
from ops.bench.fake_server import Delays, FakeOpenAIServer

from ...helpers import merge, stage_data, write_stage

HERE = Path(__file__).resolve().parent


def _failure(capsys) -> str:
    """The one error line of a failed run: progress lines may precede it on stderr, nothing follows it."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    errors = [line for line in lines if line.startswith("bench")]
    assert len(errors) == 1 and lines[-1] == errors[0], lines
    return errors[0]


PROFILES = [
    {"name": "chat", "input_tokens": 64, "output_tokens": 16, "concurrency": [1, 4], "requests_per_stream": 2},
    {"name": "long-prompt", "input_tokens": 1000, "output_tokens": 8, "concurrency": [4], "requests_per_stream": 2},
]
# A "colocated" server that answers fast but slows every token as streams pile up, and a "pd" one that
# pays for the KV transfer in TTFT but keeps tokens steady: the report must say exactly that.
COLOCATED = Delays(ttft_ms=60, itl_ms=20, itl_ms_per_inflight=4)
PD = Delays(ttft_ms=150, itl_ms=20)


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stages")
    for stage, mode in (("dev", "pd"), ("colo", "colocated")):
        data = merge(stage_data("dev"), {"stage": stage, "serving": {"mode": mode},
                                         "benchmark": {"profiles": PROFILES}})
        write_stage(folder, data)
    return folder


def _bench(config_dir, out, aiperf_bin, tokenizer_dir, *extra, calibrate=False) -> int:
    return main(["bench", "--config-dir", str(config_dir), "--aiperf", aiperf_bin, "--tokenizer",
                 str(tokenizer_dir), "--out", str(out), *([] if calibrate else ["--no-calibration"]), *extra])


@pytest.fixture(scope="module")
def two_runs(config_dir, aiperf_bin, tokenizer_dir, offline_hub, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-results")
    paths = {}
    # The pd run starts with the client-overhead calibration, as a real run does; the other skips it.
    for stage, delays, calibrate in (("dev", PD, True), ("colo", COLOCATED, False)):
        with FakeOpenAIServer("qwen3.5-9b", delays) as server:
            assert _bench(config_dir, out, aiperf_bin, tokenizer_dir, "--stage", stage, "--url", server.url,
                          "--note", "fake server", calibrate=calibrate) == 0
        (paths[stage],) = sorted((out / stage).glob("*.json"))
    return paths


def test_run_is_saved_with_stage_image_model_settings_and_time(two_runs, dev):
    run = results.load(two_runs["dev"])
    assert (run.stage, run.mode, run.label, run.note) == ("dev", "pd", "pd", "fake server")
    assert run.model_id == "qwen3.5-9b" and run.model_source == "Qwen/Qwen3.5-9B"
    assert run.image == dev.image
    assert run.hardware.title == "2 x g6.8xlarge (1 x L4, EFA x1)"
    assert run.settings["engine"]["max_model_len"] == 4096 and run.settings["kv_backend"] == "LIBFABRIC"
    assert run.settings["random_seed"] == 42
    assert run.client["name"] == "aiperf" and run.client["version"] == "0.13.0"
    created = dt.datetime.fromisoformat(run.created_at)
    assert created.utcoffset() == dt.timedelta(0)
    assert two_runs["dev"].name == created.strftime("%Y%m%dT%H%M%SZ") + "-pd.json"


def test_a_run_reports_the_clients_overhead_at_its_highest_concurrency(two_runs):
    calibrated, skipped = results.load(two_runs["dev"]), results.load(two_runs["colo"])
    assert skipped.calibration is None
    overhead = calibrated.calibration
    assert (overhead.concurrency, overhead.server_max_inflight) == (4, 4)  # the profiles' top level
    assert overhead.requests == 16 and overhead.ttft_ms.p50 >= 0


def test_every_profile_and_concurrency_level_is_measured(two_runs):
    run = results.load(two_runs["dev"])
    assert [(p.name, p.input_tokens, p.output_tokens, [lv.concurrency for lv in p.levels]) for p in run.profiles] \
        == [("chat", 64, 16, [1, 4]), ("long-prompt", 1000, 8, [4])]
    for profile in run.profiles:
        for level in profile.levels:
            assert level.requests == 16 and level.errors == 0  # max(16, concurrency x 2)
            assert len(level.samples.ttft_ms) == len(level.samples.itl_ms) == 16
            assert level.ttft_ms.p50 == pytest.approx(PD.ttft_ms, rel=0.10)


def test_compare_writes_table_and_plots_whose_verdicts_follow_the_latencies(two_runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["bench", "--compare", str(two_runs["dev"]), str(two_runs["colo"]), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {out / 'report.md'}"
    text = (out / "report.md").read_text()
    assert text.startswith("# Benchmark: pd vs colocated\n")
    assert "> **fake server**" in text
    assert "| client overhead per request | TTFT +" in text and "(medians at 4 streams) | not measured |" in text
    assert "| hardware | 2 x g6.8xlarge (1 x L4, EFA x1) | 2 x g6.8xlarge (1 x L4, EFA x1) |" in text
    chat = text.split("## chat")[1].split("## long-prompt")[0]
    # pd: higher TTFT everywhere; colocated's ITL grows with load (20 + 4 x 3 = 32 ms at 4 streams).
    assert "- TTFT p50: **colocated** ahead at concurrency 1, 4" in chat
    assert "- ITL p50: **pd** ahead at concurrency 4 " in chat
    assert "| 4 | pd |" in chat and "| 4 | colocated |" in chat
    for name in ("scaling-chat.png", "distributions-chat.png", "scaling-long-prompt.png",
                 "distributions-long-prompt.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name})" in text


def test_port_forward_to_the_serve_service_when_no_url(config_dir, aiperf_bin, tokenizer_dir, offline_hub,
                                                       tmp_path, monkeypatch):
    argv_file = tmp_path / "argv.json"
    with FakeOpenAIServer("qwen3.5-9b", Delays(ttft_ms=20, itl_ms=5)) as server:
        monkeypatch.setenv("FAKE_KUBECTL_ARGV", str(argv_file))
        monkeypatch.setenv("FAKE_FORWARD_PORT", str(server.port))
        code = _bench(config_dir, tmp_path, aiperf_bin, tokenizer_dir, "--stage", "dev", "--profile", "long-prompt",
                      "--kubectl", str(HERE / "fake_kubectl.py"))
    assert code == 0
    assert json.loads(argv_file.read_text()) == ["--namespace", "inference", "port-forward",
                                                 "service/ray-llm-serve-svc", ":8000", "--address", "127.0.0.1"]
    (path,) = (tmp_path / "dev").glob("*.json")
    run = results.load(path)
    assert run.endpoint == "inference/ray-llm-serve-svc:8000 (kubectl port-forward)"
    assert [p.name for p in run.profiles] == ["long-prompt"]


def test_port_forward_failure_is_one_line(config_dir, aiperf_bin, tokenizer_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAKE_KUBECTL_ARGV", str(tmp_path / "argv.json"))
    monkeypatch.setenv("FAKE_KUBECTL_ERROR", 'Error from server (NotFound): services "ray-llm-serve-svc" not found')
    code = _bench(config_dir, tmp_path, aiperf_bin, tokenizer_dir, "--stage", "dev",
                  "--kubectl", str(HERE / "fake_kubectl.py"))
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("bench: kubectl port-forward to inference/ray-llm-serve-svc failed: Error from server "
                             "(NotFound)")
    assert not (tmp_path / "dev").exists()


def test_unreachable_endpoint_fails_with_the_cause(config_dir, aiperf_bin, tokenizer_dir, offline_hub, tmp_path,
                                                   capsys):
    code = _bench(config_dir, tmp_path, aiperf_bin, tokenizer_dir, "--stage", "dev", "--profile", "long-prompt",
                  "--url", "http://127.0.0.1:9")
    line = _failure(capsys)
    assert code == 1
    assert line.startswith("bench: aiperf failed (exit 1): All 16 inference request(s) failed")
    assert "ConnectionRefusedError" in line
    assert not list((tmp_path / "dev").glob("*.json")), "no results file for a failed run"


def test_wrong_model_fails_with_the_servers_answer(config_dir, aiperf_bin, tokenizer_dir, offline_hub, tmp_path,
                                                   capsys):
    with FakeOpenAIServer("another-model", Delays()) as server:
        code = _bench(config_dir, tmp_path, aiperf_bin, tokenizer_dir, "--stage", "dev", "--profile",
                      "long-prompt", "--url", server.url)
    line = _failure(capsys)
    assert code == 1
    assert "first request error: HTTP 404 Not Found: " in line and "The model `qwen3.5-9b` does not exist." in line


@pytest.mark.parametrize("args, expected", [
    (["--stage", "dev", "--profile", "nope"],
     "bench --stage dev: benchmark.profiles: no profile 'nope' in stage dev (allowed: chat, long-prompt)"),
    (["--stage", "nosuch"], None),
    (["--compare", "missing-a.json", "missing-b.json"], "bench --compare: missing-a.json: no such results file"),
])
def test_bad_input_is_one_line_and_exit_2(args, expected, config_dir, aiperf_bin, tokenizer_dir, tmp_path, capsys,
                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _bench(config_dir, tmp_path, aiperf_bin, tokenizer_dir, *args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    if expected:
        assert err[0] == expected
    else:
        assert "nosuch" in err[0]


def test_missing_aiperf_says_how_to_install_it(config_dir, tmp_path, capsys):
    code = main(["bench", "--config-dir", str(config_dir), "--stage", "dev", "--url", "http://127.0.0.1:9",
                 "--aiperf", str(tmp_path / "no-aiperf")])
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and err == [f"bench: aiperf not found ({tmp_path / 'no-aiperf'}): run scripts/bench.sh, "
                                 f"which installs it in .venv-bench/"]
