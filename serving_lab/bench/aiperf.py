"""The benchmark client: NVIDIA's aiperf (PyPI `aiperf`, pinned in requirements-bench.txt).

Why aiperf and not guidellm or inference-perf: see docs/BENCHMARK.md. This module only builds its
command line and reads back what it wrote (profile_export_aiperf.json for the summary it computed,
profile_export.jsonl for each request), so what we report are aiperf's own figures.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .results import Level, RateLevel, Samples, Stats

SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"


class BenchError(Exception):
    """A benchmark step failed; the message is one line and says where to look."""


@dataclass(frozen=True)
class Workload:
    input_tokens: int
    output_tokens: int
    concurrency: int
    request_count: int
    warmup_requests: int
    random_seed: int
    request_timeout_seconds: int
    # A time bound per level (the rehearsal's --level-seconds): aiperf stops sending new requests after
    # this many seconds and counts the answers that arrive within the request timeout after it
    # (--benchmark-duration / --benchmark-grace-period, aiperf 0.13.0 aiperf/config/flags/cli_config.py);
    # request_count stays the cap.
    duration_seconds: float | None = None
    # The open-loop sweep: requests sent at this rate per second (aiperf --request-rate, arrivals drawn by
    # --arrival-pattern: poisson = exponential gaps, aiperf 0.13.0 aiperf/timing/intervals.py
    # PoissonIntervalGenerator, driven by aiperf/timing/strategies/request_rate.py) and no --concurrency, so
    # nothing caps the requests in flight; `concurrency` is then unused.
    request_rate: float | None = None
    arrival: str = "poisson"


def find_executable(explicit: str | None = None) -> str:
    """--aiperf PATH, else the aiperf beside this Python (scripts/bench.sh's venv), else .venv-bench/, else PATH."""
    candidates = (
        [explicit]
        if explicit
        else [
            str(Path(sys.executable).parent / "aiperf"),
            str(Path(__file__).resolve().parents[2] / ".venv-bench" / "bin" / "aiperf"),
            shutil.which("aiperf") or "",
        ]
    )
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    where = explicit or ", ".join(c for c in candidates if c)
    raise BenchError(f"aiperf not found ({where}): run scripts/bench.sh, which installs it in .venv-bench/")


def command(
    executable: str,
    *,
    url: str,
    model: str,
    tokenizer: str,
    workload: Workload,
    artifact_dir: Path,
    api_key: str | None = None,
    goodput: tuple[float, float] | None = None,
) -> list[str]:
    """Streaming chat completions at a fixed concurrency (or, with `workload.request_rate`, at a fixed
    request rate), fixed prompt and answer lengths.

    `goodput` (TTFT, ITL objectives in ms) asks aiperf for its own goodput too (--goodput): a cross-check of
    ours (goodput.py counts from the per-request records; aiperf 0.13.0
    aiperf/metrics/types/good_request_count_metric.py and goodput_metric.py).

    `ignore_eos` makes vLLM produce exactly `output_tokens` (the profile's answer length) instead of
    stopping early; a server that does not know it ignores it. Server metrics and GPU telemetry are off:
    Ray Serve's port 8000 has no /metrics and the GPUs are not on this machine.
    """
    return [
        executable,
        "profile",
        *_endpoint_args(url, model, tokenizer),
        *_shape_args(workload),
        *_load_args(workload),
        *_run_args(workload, artifact_dir),
        *_bound_args(workload, goodput),
        *(["--api-key", api_key] if api_key else []),
    ]


def _endpoint_args(url: str, model: str, tokenizer: str) -> list[str]:
    """What is asked of whom: streaming chat completions of `model` at `url`, counted with `tokenizer`."""
    return ["--model", model, "--url", url, "--endpoint-type", "chat", "--streaming", "--tokenizer", tokenizer]


def _shape_args(workload: Workload) -> list[str]:
    """Fixed prompt and answer lengths (no spread), the answer's forced by ignore_eos."""
    return [
        "--isl",
        str(workload.input_tokens),
        "--prompt-input-tokens-stddev",
        "0",
        "--osl",
        str(workload.output_tokens),
        "--prompt-output-tokens-stddev",
        "0",
        "--extra-inputs",
        "ignore_eos:true",
    ]


def _load_args(workload: Workload) -> list[str]:
    """A fixed request rate (open loop) or a fixed concurrency (closed loop)."""
    if workload.request_rate is not None:
        return ["--request-rate", f"{workload.request_rate:g}", "--arrival-pattern", workload.arrival]
    return ["--concurrency", str(workload.concurrency)]


def _run_args(workload: Workload, artifact_dir: Path) -> list[str]:
    """How many requests, their timeout and seed; no UI, server metrics or GPU telemetry; where to write."""
    return [
        "--request-count",
        str(workload.request_count),
        "--request-timeout-seconds",
        str(workload.request_timeout_seconds),
        "--random-seed",
        str(workload.random_seed),
        "--ui-type",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        "--artifact-dir",
        str(artifact_dir),
    ]


def _bound_args(workload: Workload, goodput: tuple[float, float] | None) -> list[str]:
    """The optional ones: a warm-up, a time bound per level (with its grace period), aiperf's goodput."""
    argv = ["--warmup-request-count", str(workload.warmup_requests)] if workload.warmup_requests else []
    if workload.duration_seconds is not None:
        argv += [
            "--benchmark-duration",
            f"{workload.duration_seconds:g}",
            "--benchmark-grace-period",
            f"{workload.request_timeout_seconds:g}",
        ]
    if goodput is not None:
        ttft_ms, itl_ms = goodput
        argv += ["--goodput", f"time_to_first_token:{ttft_ms:.12g} inter_token_latency:{itl_ms:.12g}"]
    return argv


def run(argv: list[str], artifact_dir: Path, env: dict | None = None, timeout: float | None = None) -> Path:
    """Run aiperf, its output in <artifact_dir>/aiperf.log; raise BenchError with the reason on failure."""
    artifact_dir = Path(artifact_dir)
    artifact_dir.mkdir(parents=True, exist_ok=True)
    log = artifact_dir / "aiperf.log"
    full_env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", "NO_COLOR": "1", "COLUMNS": "160", **(env or {})}
    try:
        with log.open("w") as out:
            proc = subprocess.run(
                argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, timeout=timeout, check=False
            )
    except subprocess.TimeoutExpired:
        raise BenchError(f"aiperf did not finish within {timeout:.0f} s (log: {log})") from None
    except OSError as exc:
        raise BenchError(f"cannot run aiperf: {exc}") from None
    if proc.returncode != 0 or not (artifact_dir / SUMMARY).is_file():
        first = next((r.error for r in requests(artifact_dir) if r.error), None)
        detail = f"; first request error: {' '.join(first.split())[:300]}" if first else ""
        raise BenchError(f"aiperf failed (exit {proc.returncode}): {_reason(log)}{detail} (log: {log})")
    return artifact_dir


# Rich's box drawing (aiperf's error panels): lines made of these carry no words.
_BOX = "│╭╮╰╯─━┃┏┓┗┛═║╔╗╚╝┌┐└┘├┤┬┴┼•"
# The last line of a Python traceback: `module.path.SomeError: message`.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Failure|Interrupt)):\s*(\S.*)$")


def _unboxed(line: str) -> str:
    return " ".join(line.strip().strip(_BOX).split())


def _reason(log: Path) -> str:
    """The most telling line of a failed aiperf run, never a fragment of a box: its 'Reason:' box line,
    else the last exception line of a traceback or the last ERROR line (whichever comes later), else the
    title and first words of the last box, else the last line with words."""
    text = log.read_text(errors="replace") if log.is_file() else ""
    reason = re.search(r"Reason:\s*(.+?)(?:\n\s*│?\s*\n|╰|Cause:)", text, re.DOTALL)
    if reason:
        return " ".join(re.sub(r"[│]", " ", reason.group(1)).split())[:400]
    lines = text.splitlines()
    found = []  # (line number, text)
    for number, line in enumerate(lines):
        match = _EXCEPTION.match(line.strip())
        if match:
            found.append((number, f"{match.group(1)}: {match.group(2)}"))
        elif " ERROR " in line:
            found.append((number, " ".join(line.split())))
    if found:
        return found[-1][1][:400]
    boxes = [number for number, line in enumerate(lines) if line.lstrip().startswith("╭")]
    if boxes:
        start = boxes[-1]
        title = _unboxed(lines[start])
        body = next((_unboxed(line) for line in lines[start + 1 :] if _unboxed(line)), "")
        return ": ".join(part for part in (title, body) if part)[:400] or "no output"
    words = [_unboxed(line) for line in lines if _unboxed(line)]
    return words[-1][:400] if words else "no output"


def _stats(summary: dict, key: str) -> Stats:
    entry = summary.get(key)
    if not isinstance(entry, dict) or "p50" not in entry:
        raise BenchError(f"aiperf reported no {key} (no successful streamed request?)")
    return Stats(
        mean=entry["avg"], p50=entry["p50"], p90=entry["p90"], p99=entry["p99"], min=entry["min"], max=entry["max"]
    )


def _value(record: dict, key: str) -> float | None:
    metric = record.get("metrics", {}).get(key)
    return None if metric is None else metric.get("value")


@dataclass(frozen=True)
class RequestMetrics:
    request_id: str | None
    error: str | None
    ttft_ms: float | None
    itl_ms: float | None  # aiperf's inter_token_latency: (end-to-end - TTFT) / (output tokens - 1)
    e2e_ms: float | None
    # Wall-clock ns (aiperf's metadata request_start_ns, request_end_ns: the end is the last response's, or
    # the error's): the span of a level (goodput's duration) and the requests in flight at once.
    start_ns: int | None = None
    end_ns: int | None = None
    # JSON numbers as aiperf wrote them (integers in its records; _value reads every metric alike).
    output_tokens: float | None = None  # aiperf's output_sequence_length
    aiperf_good: float | None = None  # aiperf's own verdict (good_request_count, 0 or 1) when run with --goodput


def requests(artifact_dir: Path) -> list[RequestMetrics]:
    """Each measured request of a run (the warm-up phase left out), from aiperf's per-request export."""
    path = Path(artifact_dir) / RECORDS
    found = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        record = json.loads(line)
        metadata = record.get("metadata", {})
        if metadata.get("benchmark_phase", "profiling") != "profiling":
            continue
        error = record.get("error")
        if isinstance(error, dict):
            code = f"HTTP {error['code']} " if error.get("code") else ""
            error = f"{code}{error.get('type', 'error')}: {error.get('cause') or error.get('message', '')}"
        found.append(
            RequestMetrics(
                request_id=metadata.get("x_request_id"),
                error=str(error) if error else None,
                ttft_ms=_value(record, "time_to_first_token"),
                itl_ms=_value(record, "inter_token_latency"),
                e2e_ms=_value(record, "request_latency"),
                start_ns=metadata.get("request_start_ns"),
                end_ns=metadata.get("request_end_ns"),
                output_tokens=_value(record, "output_sequence_length"),
                aiperf_good=_value(record, "good_request_count"),
            )
        )
    return found


def read_summary(artifact_dir: Path) -> dict:
    """aiperf's summary of a run (profile_export_aiperf.json)."""
    path = Path(artifact_dir) / SUMMARY
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read aiperf's {path}: {exc}") from None
    if not isinstance(data, dict):
        raise BenchError(f"aiperf's {path} is not a JSON object")
    return data


def parse(artifact_dir: Path, concurrency: int) -> Level:
    """aiperf's summary percentiles and throughput, and each measured request (warm-up excluded)."""
    return Level(concurrency=concurrency, **_figures(Path(artifact_dir), f"concurrency {concurrency}"))


def parse_rate(artifact_dir: Path, request_rate: float, arrival: str = "poisson") -> RateLevel:
    """An open-loop level: the same figures, and the most requests in flight at once (from the records)."""
    figures = _figures(Path(artifact_dir), f"{request_rate:g} requests/s")
    return RateLevel(
        request_rate=request_rate, arrival=arrival, max_inflight=max_inflight(requests(artifact_dir)), **figures
    )


def max_inflight(measured: list[RequestMetrics]) -> int:
    """The most requests whose [start, end] spans overlap at one instant (an end before a start at the same ns)."""
    events = sorted(
        [(r.start_ns, 1) for r in measured if r.start_ns is not None and r.end_ns is not None]
        + [(r.end_ns, -1) for r in measured if r.start_ns is not None and r.end_ns is not None]
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _figures(artifact_dir: Path, where: str) -> dict:
    """The figures a concurrency level and a rate level share; `where` names the level in errors."""
    summary = read_summary(artifact_dir)
    measured = requests(artifact_dir)
    ok = [r for r in measured if r.error is None and r.ttft_ms is not None]
    if not ok:
        first = next((r.error for r in measured if r.error), None) or summary.get("error_summary") or "no requests"
        raise BenchError(
            f"no request succeeded at {where} ({len(measured)} sent): " + " ".join(str(first).split())[:300]
        )
    return {
        "requests": len(measured),
        "errors": len(measured) - len(ok),
        "duration_s": summary["benchmark_duration"]["avg"],
        "ttft_ms": _stats(summary, "time_to_first_token"),
        "itl_ms": _stats(summary, "inter_token_latency"),
        "e2e_ms": _stats(summary, "request_latency"),
        "output_tokens_per_s": summary["output_token_throughput"]["avg"],
        "requests_per_s": summary["request_throughput"]["avg"],
        "samples": Samples(
            ttft_ms=[round(r.ttft_ms, 3) for r in ok if r.ttft_ms is not None],  # all of ok: for mypy
            itl_ms=[round(r.itl_ms, 3) for r in ok if r.itl_ms is not None],
            e2e_ms=[round(r.e2e_ms, 3) for r in ok if r.e2e_ms is not None],
        ),
    }


def client_python(executable: str) -> str | None:
    """The Python that runs aiperf: beside the executable (a venv), else its #! line."""
    beside = Path(executable).parent / "python"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    try:
        with open(executable, "rb") as script:
            first = script.readline(512).decode(errors="replace")
    except OSError:
        return None
    if first.startswith("#!") and "python" in first:
        interpreter = first[2:].split()[0]
        return interpreter if os.access(interpreter, os.X_OK) else None
    return None


def version(executable: str, env: dict | None = None) -> str:
    """aiperf's version, read by the Python that runs it (`client_python`; a tree unpacked on the rehearsal
    host is found through `env`'s PYTHONPATH)."""
    python = client_python(executable)
    if python is None:
        return "unknown"
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('aiperf'))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env={**os.environ, **(env or {})},
        ).stdout.strip()
        return out or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
