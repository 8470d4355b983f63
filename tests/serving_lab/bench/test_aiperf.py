"""The aiperf command line: streaming chat at fixed lengths, a warm-up, nothing that needs the network
beyond the endpoint; and the reason of a failed run read from aiperf's own log."""

from __future__ import annotations

from pathlib import Path

from serving_lab.bench import aiperf

WORKLOAD = aiperf.Workload(
    input_tokens=3500,
    output_tokens=200,
    concurrency=16,
    request_count=128,
    warmup_requests=16,
    random_seed=7,
    request_timeout_seconds=900,
)


def _argv(**extra) -> list[str]:
    return aiperf.command(
        "/x/aiperf",
        url="http://127.0.0.1:8000",
        model="qwen3.5-9b",
        tokenizer="Qwen/Qwen3.5-9B",
        workload=WORKLOAD,
        artifact_dir=Path("/tmp/a"),
        **extra,
    )


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_streaming_chat_at_the_profiles_lengths_and_concurrency():
    argv = _argv()
    assert argv[:2] == ["/x/aiperf", "profile"]
    assert "--streaming" in argv and _option(argv, "--endpoint-type") == "chat"
    assert (_option(argv, "--isl"), _option(argv, "--osl")) == ("3500", "200")
    assert _option(argv, "--prompt-input-tokens-stddev") == _option(argv, "--prompt-output-tokens-stddev") == "0"
    assert _option(argv, "--extra-inputs") == "ignore_eos:true"
    assert (
        _option(argv, "--concurrency"),
        _option(argv, "--request-count"),
        _option(argv, "--warmup-request-count"),
    ) == ("16", "128", "16")
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
    log.write_text(
        "06:19:07 INFO x\n╭─ AIPerf System Exit Errors ─╮\n│ • Service: system_controller │\n"
        "│    Reason: All 4 inference request(s) failed. No   │\n│            successful responses.   │\n"
        "╰──────╯\n"
    )
    assert aiperf._reason(log) == "All 4 inference request(s) failed. No successful responses."


def test_failure_reason_falls_back_to_last_error_line(tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text("a\n06:19:07.892 ERROR    Failed to load tokenizer 'x' (t.py:1)\nb\n")
    assert aiperf._reason(log) == "06:19:07.892 ERROR Failed to load tokenizer 'x' (t.py:1)"


# --- the reason of a failure is a real line, never a fragment of a box ---------------------------------

import pytest

TOKENIZER_FAILURE = """\
16:59:22.544 INFO     Starting AIPerf System (_single_run.py:81)
16:59:23.789 WARNING  Retrying in 1s [Retry 1/5]. (_http.py:554)
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/aiperf/common/tokenizer.py", line 541, in from_pretrained
    raise TokenizerError(
aiperf.common.exceptions.TokenizerError: Failed to load tokenizer 'nope/nope': OSError: We couldn't connect to 'http://127.0.0.1:9' to load the files, and couldn't find them in the cached files.
Check your internet connection or see how to run the library in offline mode.
\"\"\"

╭──────────────── Offline - Files Not Cached ────────────────╮
│                                                            │
│  Failed to load tokenizer 'nope/nope'                      │
│                                                            │
│  Suggested Fixes:                                          │
│    • Pre-download online, then: export HF_HUB_OFFLINE=1    │
│                                                            │
╰────────────────────────────────────────────────────────────╯
"""


def test_failure_reason_is_the_exception_line_not_the_box_border(tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text(TOKENIZER_FAILURE)
    assert aiperf._reason(log) == (
        "TokenizerError: Failed to load tokenizer 'nope/nope': OSError: We couldn't connect "
        "to 'http://127.0.0.1:9' to load the files, and couldn't find them in the cached "
        "files."
    )


def test_failure_reason_of_a_box_alone_is_its_title_and_first_words(tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text("16:59:22 INFO start\n" + TOKENIZER_FAILURE[TOKENIZER_FAILURE.index("╭") :])
    assert aiperf._reason(log) == "Offline - Files Not Cached: Failed to load tokenizer 'nope/nope'"


@pytest.mark.parametrize(
    "text, reason",
    [
        (
            "x\nValueError: first\n06:19:08.000 ERROR    later error (a.py:1)\n╰────╯\n",
            "06:19:08.000 ERROR later error (a.py:1)",
        ),
        (
            "06:19:08.000 ERROR    earlier (a.py:1)\nTraceback (most recent call last):\nRuntimeError: later\n│ │\n╰─╯\n",
            "RuntimeError: later",
        ),
        ("some words\n│          │\n╰──────────╯\n", "some words"),
        ("╭──╮\n╰──╯\n", "no output"),
        ("", "no output"),
    ],
)
def test_failure_reason_is_the_latest_real_line(text, reason, tmp_path):
    log = tmp_path / "aiperf.log"
    log.write_text(text)
    assert aiperf._reason(log) == reason


def test_a_level_time_bound_becomes_aipers_duration_and_grace():
    bounded = aiperf.Workload(**{**WORKLOAD.__dict__, "duration_seconds": 30.0})
    argv = aiperf.command(
        "/x/aiperf",
        url="http://127.0.0.1:8000",
        model="m",
        tokenizer="t",
        workload=bounded,
        artifact_dir=Path("/tmp/a"),
    )
    assert (_option(argv, "--benchmark-duration"), _option(argv, "--benchmark-grace-period")) == ("30", "900")
    assert _option(argv, "--request-count") == "128"  # still the cap
    assert "--benchmark-duration" not in _argv()


def test_version_is_read_by_the_interpreter_on_the_scripts_first_line(tmp_path):
    # On the rehearsal host aiperf is an unpacked tree (no venv python beside it), found through PYTHONPATH.
    import sys

    site = tmp_path / "site" / "aiperf-9.8.7.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: aiperf\nVersion: 9.8.7\n")
    script = tmp_path / "bin" / "aiperf"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nprint('aiperf')\n")
    assert aiperf.version(str(script), env={"PYTHONPATH": str(tmp_path / "site")}) == "9.8.7"
    assert aiperf.version(str(tmp_path / "missing")) == "unknown"
