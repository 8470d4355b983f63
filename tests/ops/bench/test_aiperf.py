"""The aiperf command line: streaming chat at fixed lengths, a warm-up, nothing that needs the network
beyond the endpoint; and the reason of a failed run read from aiperf's own log."""
from __future__ import annotations

from pathlib import Path

from ops.bench import aiperf

WORKLOAD = aiperf.Workload(input_tokens=3500, output_tokens=200, concurrency=16, request_count=128,
                           warmup_requests=16, random_seed=7, request_timeout_seconds=900)


def _argv(**extra) -> list[str]:
    return aiperf.command("/x/aiperf", url="http://127.0.0.1:8000", model="qwen3.5-9b", tokenizer="Qwen/Qwen3.5-9B",
                          workload=WORKLOAD, artifact_dir=Path("/tmp/a"), **extra)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_streaming_chat_at_the_profiles_lengths_and_concurrency():
    argv = _argv()
    assert argv[:2] == ["/x/aiperf", "profile"]
    assert "--streaming" in argv and _option(argv, "--endpoint-type") == "chat"
    assert (_option(argv, "--isl"), _option(argv, "--osl")) == ("3500", "200")
    assert _option(argv, "--prompt-input-tokens-stddev") == _option(argv, "--prompt-output-tokens-stddev") == "0"
    assert _option(argv, "--extra-inputs") == "ignore_eos:true"
    assert (_option(argv, "--concurrency"), _option(argv, "--request-count"),
            _option(argv, "--warmup-request-count")) == ("16", "128", "16")
    assert (_option(argv, "--model"), _option(argv, "--tokenizer")) == ("qwen3.5-9b", "Qwen/Qwen3.5-9B")
    assert _option(argv, "--random-seed") == "7" and _option(argv, "--request-timeout-seconds") == "900"


def test_no_min_tokens_which_the_pd_prefill_leg_refuses():
    # Ray's PD proxy sends the prefill leg with max_tokens = 1 (ray/llm/_internal/serve/serving_patterns/
    # prefill_decode/pd_server.py, _prepare_prefill_request): a request with min_tokens then fails with
    # HTTP 400 (min_tokens must be less than or equal to max_tokens=1).
    assert "min_tokens" not in " ".join(_argv())


def test_no_server_metrics_no_gpu_telemetry_no_dashboard():
    argv = _argv()
    assert {"--no-server-metrics", "--no-gpu-telemetry"} <= set(argv) and _option(argv, "--ui-type") == "none"
    assert "--api-key" not in argv
    assert _option(_argv(api_key="k"), "--api-key") == "k"


def test_failure_reason_is_the_reason_line_of_aiperfs_box(tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text("06:19:07 INFO x\n╭─ AIPerf System Exit Errors ─╮\n│ • Service: system_controller │\n"
                   "│    Reason: All 4 inference request(s) failed. No   │\n│            successful responses.   │\n"
                   "╰──────╯\n")
    assert aiperf._reason(log) == "All 4 inference request(s) failed. No successful responses."


def test_failure_reason_falls_back_to_last_error_line(tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text("a\n06:19:07.892 ERROR    Failed to load tokenizer 'x' (t.py:1)\nb\n")
    assert aiperf._reason(log) == "06:19:07.892 ERROR Failed to load tokenizer 'x' (t.py:1)"
