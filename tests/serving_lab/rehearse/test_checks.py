"""The rehearsal's checks, against the project's fake OpenAI server and the NIXL log fixtures that
`ops verify` uses (tests/ops/fixtures)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clients.report import Check, Report
from serving_lab.bench.fake_server import Delays, FakeOpenAIServer
from serving_lab.rehearse import checks

from ...clients.nixl_exporter import exporter_text
from ...helpers import ROOT

FIXTURES = ROOT / "tests" / "ops" / "fixtures"


def test_models_chat_and_stream_pass_against_an_openai_server():
    report = Report("rehearse", "dev")
    with FakeOpenAIServer("qwen3.5-9b", Delays(ttft_ms=20, itl_ms=1)) as server:
        checks.openai(report, server.url, "qwen3.5-9b")
    assert [(c.name, c.status) for c in report.checks] == [
        ("GET /v1/models", "pass"),
        ("POST /v1/chat/completions", "pass"),
        ("POST /v1/chat/completions (stream)", "pass"),
    ]
    stream = report.find("POST /v1/chat/completions (stream)")
    assert stream.data["chunks"] == 32 and stream.data["ttft_s"] >= 0.02


def test_a_model_that_is_not_served_fails_with_the_list():
    report = Report("rehearse", "dev")
    with FakeOpenAIServer("other-model") as server:
        checks.openai(report, server.url, "qwen3.5-9b")
    (check,) = report.checks
    assert check.status == "fail" and check.detail == "'qwen3.5-9b' is not listed (listed: other-model)"


def test_an_unreachable_endpoint_is_one_line():
    report = Report("rehearse", "dev")
    checks.openai(report, "http://127.0.0.1:9", "qwen3.5-9b")
    (check,) = report.checks
    assert check.status == "fail" and check.detail.startswith("cannot connect:")


class _PrefillFirst(BaseHTTPRequestHandler):
    """Like Ray's PD proxy in front of vLLM: the prefill leg is capped with max_tokens=1 only, so a
    request that names its length in max_completion_tokens waits for the whole answer first."""

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        time.sleep(0.002 * tokens if "max_completion_tokens" in body else 0.002)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i in range(tokens):
            chunk = {"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")


def test_the_token_field_probe_measures_both_fields_side_by_side():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PrefillFirst)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        report = Report("rehearse", "dev")
        checks.token_field_probe(report, f"http://127.0.0.1:{server.server_port}", "qwen3.5-9b", tokens=100)
    finally:
        server.shutdown()
    (check,) = report.checks
    legacy, modern = check.data["max_tokens"], check.data["max_completion_tokens"]
    assert check.status == "pass" and legacy["chunks"] == modern["chunks"] == 100
    assert modern["ttft_s"] > legacy["ttft_s"]  # 0.2 s of "prefill generating" vs 2 ms
    assert "with max_tokens" in check.detail and "the benchmark sends max_tokens" in check.detail


@pytest.mark.parametrize(
    "fixture, efa_host, status, verdict",
    [
        ("ucx.log", False, "warn", "ucx"),  # one host without EFA: honest "not EFA", not hidden
        ("tcp.log", False, "warn", "tcp"),
        ("efa.log", True, "pass", "efa"),
        ("tcp.log", True, "fail", "tcp"),  # an EFA host falling back to tcp is a failure
        ("missing-plugin.log", False, "fail", "missing-plugin"),
    ],
)
def test_nixl_verdict_on_the_workers_logs(fixture, efa_host, status, verdict):
    report = Report("rehearse", "dev")
    finding = checks.nixl_transport(report, {"worker-1.err": (FIXTURES / fixture).read_text()}, expect_efa=efa_host)
    (check,) = report.checks
    assert (check.status, finding.verdict) == (status, verdict)
    if not efa_host and status == "warn":
        assert check.detail.startswith("not EFA (this host has no EFA device): ")


def test_nixl_lines_are_kept_as_evidence_bounded_and_deduplicated():
    text = (FIXTURES / "ucx.log").read_text()
    lines = checks.nixl_lines({"worker-1.err": text, "worker-2.err": text}, limit=500)
    assert lines and all(line.startswith("worker-") for line in lines)
    assert len(lines) == len({line.split(": ", 1)[1] for line in lines})  # deduplicated across files
    assert len(checks.nixl_lines({"w.err": "NIXL x\n" * 10 + "".join(f"NIXL {i}\n" for i in range(50))}, limit=5)) == 5


class _Newlines(BaseHTTPRequestHandler):
    """What dummy weights answered on an H200: 32 tokens, all of them a newline."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        self._json({"data": [{"id": "qwen3.5-9b"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for _ in range(body["max_tokens"]):
                self.wfile.write(b'data: {"choices": [{"index": 0, "delta": {"content": "\\n"}}]}\n\n')
            self.wfile.write(b"data: [DONE]\n\n")
        else:
            self._json(
                {
                    "choices": [{"message": {"content": "\n" * body["max_tokens"]}}],
                    "usage": {"completion_tokens": body["max_tokens"]},
                }
            )

    def _json(self, data):
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def test_generated_tokens_pass_even_when_dummy_weights_answer_only_whitespace():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Newlines)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        report = Report("rehearse", "dev")
        checks.openai(report, f"http://127.0.0.1:{server.server_port}", "qwen3.5-9b")
    finally:
        server.shutdown()
    chat = report.find("POST /v1/chat/completions")
    assert chat.status == "pass" and chat.data["completion_tokens"] == 32
    assert report.find("POST /v1/chat/completions (stream)").data["chunks"] == 32


def _benchmark_check(levels: dict[int, tuple[float, float, float]], skipped: list[str]):
    from pathlib import Path

    from ..bench.runs import make_run

    run = make_run("pd", {"chat": levels} if levels else {})
    run.settings["skipped"] = skipped
    report = Report("rehearse", "dev")
    checks.benchmark(report, run, Path("/r/run.json"))
    (check,) = report.checks
    return check


def test_a_benchmark_that_measured_every_level_passes():
    check = _benchmark_check({1: (300.0, 6.0, 1900.0), 4: (400.0, 7.0, 2200.0)}, [])
    assert (check.status, check.detail) == ("pass", "2 levels measured; results: /r/run.json")


def test_a_benchmark_the_time_budget_cut_short_warns_naming_the_levels_left_out():
    check = _benchmark_check({1: (300.0, 6.0, 1900.0)}, ["long-prompt-c1", "long-prompt-c16"])
    assert check.status == "warn"
    assert check.detail == (
        "1 of 3 levels measured (time budget spent before long-prompt-c1, long-prompt-c16); results: /r/run.json"
    )
    assert "--budget" in check.fix


def test_a_benchmark_that_measured_no_level_fails():
    # seen on an H200: the engine as rendered reached RUNNING at 402 s of a 450 s --budget and the check passed
    check = _benchmark_check({}, ["chat-c1", "chat-c4"])
    assert check.status == "fail"
    assert check.detail == "no level measured (time budget spent before chat-c1, chat-c4); results: /r/run.json"


class _Exporters:
    """Both engines' NIXL exporters as the rehearsal scrapes them: each request the server answered moves
    `per_request` bytes to the decode engine in `seconds`; the first `lag` scrapes after it still show the counters
    from before, as NIXL's exporter does until its next export (every 100 ms: src/core/telemetry/telemetry.cpp)."""

    def __init__(self, per_request: int, seconds: float, answer: bool = True, lag: int = 0) -> None:
        self.per_request, self.us, self.answer, self.lag = per_request, round(seconds * 1e6), answer, lag
        self.served: Callable[[], int] = lambda: 0  # the fake server's answered requests
        self.shown, self.late = 0, 0

    def __call__(self) -> dict[str, str]:
        if self.served() > self.shown:
            if self.late < self.lag:
                self.late += 1
            else:
                self.shown, self.late = self.served(), 0
        if not self.answer:
            return {"prefill": "", "decode": ""}
        decode = exporter_text(self.shown * self.per_request, self.shown, self.shown * self.us)
        return {"prefill": exporter_text(0, 0, 0, agent="prefill-0"), "decode": decode}


def _rate_check(exporters: _Exporters, floor: float = 6.25, url: str | None = None) -> Check:
    report = Report("rehearse", "dev")
    with FakeOpenAIServer("qwen3.5-9b") as server:
        exporters.served = lambda: len(server.records)
        checks.kv_transfer_rate(
            report,
            url or server.url,
            "qwen3.5-9b",
            tokens=3500,
            floor=(floor, "6.25 Gbps, stage dev's"),
            scrape=exporters,
            backend=None,
        )
    (check,) = report.checks
    return check


def test_the_rate_check_passes_over_the_floor_with_the_floor_labelled():
    check = _rate_check(_Exporters(112_066_560, 0.02))  # 44.8 Gbps a transfer
    assert check.status == "pass" and check.data["pod"] == "decode" and check.data["median_gbps"] == 44.827
    assert check.detail.endswith("floor: 6.25 Gbps, stage dev's")


def test_a_transfer_the_exporter_shows_one_scrape_late_counts_to_its_own_request():
    # seen on an H100 (2026-12-05, evidence/2026-12-05-h100-compiled-graphs/runs/pd-vd.log): "1 of 3 long-prompt
    # requests moved no KV bytes", then every byte accounted in the next check
    check = _rate_check(_Exporters(112_066_560, 0.02, lag=1))
    assert check.status == "pass" and check.data["bytes"] == 3 * 112_066_560 and check.data["transfers"] == 3


def test_a_slow_transfer_fails_the_rehearsal_s_rate_check():
    check = _rate_check(_Exporters(112_066_560, 0.5))  # 1.8 Gbps
    assert check.status == "fail" and check.detail.startswith("slow transfer: decode:")
    assert "--nixl-backend" in check.fix


def test_an_exporter_that_does_not_answer_fails_in_one_line():
    check = _rate_check(_Exporters(112_066_560, 0.02, answer=False))
    assert check.status == "fail" and check.detail.startswith("NIXL's exporter: no agent_rx_bytes_total")


def test_no_bytes_moved_fails():
    check = _rate_check(_Exporters(0, 0.0))
    assert check.status == "fail" and "moved no KV bytes over NIXL" in check.detail


def test_an_endpoint_that_does_not_answer_fails_the_rate_check():
    check = _rate_check(_Exporters(112_066_560, 0.02), url="http://127.0.0.1:9")
    assert check.status == "fail" and check.detail.startswith("a long-prompt request failed: cannot connect")
