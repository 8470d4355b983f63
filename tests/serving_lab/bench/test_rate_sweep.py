"""The request-rate sweep end to end: `bench --stage --sweep rate` runs the real aiperf in its Poisson
request-rate mode against the fake server, and our goodput (counted from the records) agrees with
aiperf's own --goodput request by request. Gated on what load cannot change: the arguments aiperf
recorded, counts, and the two verdicts on the same record values; the rates are reported, not gated."""

from __future__ import annotations

import json

import pytest

from ops.__main__ import main
from serving_lab.bench import aiperf, goodput, results
from serving_lab.bench.fake_server import Delays, FakeOpenAIServer

from ...helpers import merge, stage_data, write_stage
from .measured import report

RATE = 16.0
SECONDS = 2.0  # max(16, 16 x 2) = 32 requests
# TTFT grows with the requests in flight, so Poisson bursts push some past the objective and leave others
# within it: which ones depends on the machine's load, but both counts judge the same records.
DELAYS = Delays(ttft_ms=20, ttft_ms_per_inflight=40, itl_ms=4, itl_ms_per_inflight=3)
TTFT_SLO, ITL_SLO = "0.07", "0.008"


@pytest.fixture(scope="module")
def rate_run(aiperf_bin, tokenizer_dir, offline_hub, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stages")
    profile = {"name": "chat", "input_tokens": 32, "output_tokens": 8, "concurrency": [1], "request_rates": [RATE]}
    write_stage(folder, merge(stage_data("dev"), {"benchmark": {"profiles": [profile]}}))
    out = tmp_path_factory.mktemp("bench-results")
    with FakeOpenAIServer("qwen3.5-9b", DELAYS) as server:
        code = main(
            [
                "bench",
                "--config-dir",
                str(folder),
                "--stage",
                "dev",
                "--url",
                server.url,
                "--aiperf",
                aiperf_bin,
                "--tokenizer",
                str(tokenizer_dir),
                "--out",
                str(out),
                "--no-calibration",
                "--min-requests",
                "16",
                "--sweep",
                "rate",
                "--rate-seconds",
                f"{SECONDS:g}",
                "--slo-ttft",
                TTFT_SLO,
                "--slo-itl",
                ITL_SLO,
            ]
        )
    assert code == 0
    (path,) = (out / "dev").glob("*.json")
    return path


def test_a_rate_level_is_one_poisson_aiperf_run_without_a_concurrency_cap(rate_run):
    (profile,) = results.load(rate_run).profiles
    assert profile.levels == []  # --sweep rate: no concurrency level
    (level,) = profile.rate_levels
    assert (level.request_rate, level.arrival, level.requests) == (RATE, "poisson", 32)
    assert level.max_inflight >= 1
    summary = aiperf.read_summary(rate_run.with_suffix("") / "chat-r16")
    phases = {phase["name"]: phase for phase in summary["input_config"]["phases"]}
    profiling = phases["profiling"]
    assert (profiling["type"], profiling["rate"], profiling["requests"]) == ("poisson", RATE, 32)
    assert "concurrency" not in profiling  # open loop
    assert phases["warmup"]["exclude_from_results"] is True
    assert summary["input_config"]["slos"] == {"time_to_first_token": 70.0, "inter_token_latency": 8.0}


def test_our_goodput_agrees_with_aiperfs_request_by_request(rate_run):
    folder = rate_run.with_suffix("") / "chat-r16"
    measured = aiperf.requests(folder)
    objectives = goodput.Objectives(ttft_ms=70.0, itl_ms=8.0)
    assert len(measured) == 32 and all(r.aiperf_good in (0, 1) for r in measured if r.error is None)
    assert [goodput.is_good(r, objectives) for r in measured] == [bool(r.aiperf_good) for r in measured]
    summary = aiperf.read_summary(folder)
    (level,) = results.load(rate_run).profiles[0].rate_levels
    saved = level.goodput
    assert saved.good == summary["good_request_count"]["avg"] == sum(goodput.is_good(r, objectives) for r in measured)
    assert saved.aiperf_per_s == summary["goodput"]["avg"]
    span_ns = max(r.end_ns for r in measured) - min(r.start_ns for r in measured)
    assert saved.duration_s == span_ns / 1e9 and saved.per_s == saved.good / saved.duration_s
    report(
        f"goodput at {RATE:g} requests/s (Poisson): {saved.good} of {saved.requests} good, ours "
        f"{saved.per_s:.2f}/s over the requests' span {saved.duration_s:.2f} s; aiperf's {saved.aiperf_per_s:.2f}/s "
        f"over its phase window {saved.good / saved.aiperf_per_s if saved.aiperf_per_s else float('nan'):.2f} s"
    )


def test_bench_goodput_on_the_run_counts_what_the_run_saved(rate_run, tmp_path, capsys):
    assert main(["bench", "--goodput", str(rate_run), "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "goodput objectives TTFT <= 70 ms and ITL <= 8 ms (recorded by run 'pd')" in err
    assert results.load(tmp_path / rate_run.name) == results.load(rate_run)
    assert json.loads(rate_run.read_text())["settings"]["slo"] == {"ttft_seconds": 0.07, "itl_seconds": 0.008}


def test_request_rates_may_have_spaces_after_their_commas():
    from serving_lab.bench import cli as bench_cli

    assert bench_cli._rates("0.5, 1, 2") == [0.5, 1.0, 2.0]
