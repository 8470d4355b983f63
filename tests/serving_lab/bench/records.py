"""aiperf artifacts written by hand, in aiperf 0.13.0's format (what `aiperf.requests` and `aiperf.parse`
read: profile_export.jsonl, one record per request, and the summary profile_export_aiperf.json), so that
goodput can be counted on requests whose every value is known."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from serving_lab.bench import aiperf
from serving_lab.bench.results import Stats

T0 = 1_796_000_000_000_000_000  # a wall-clock ns, like aiperf's request_start_ns


@dataclass(frozen=True)
class Request:
    start_ms: float  # after T0
    end_ms: float
    ttft_ms: float | None = None
    itl_ms: float | None = None
    output_tokens: int | None = 8
    error: str | None = None
    phase: str = "profiling"


def record(request: Request, index: int) -> dict:
    metrics = {}
    for name, value, unit in (
        ("time_to_first_token", request.ttft_ms, "ms"),
        ("inter_token_latency", request.itl_ms, "ms"),
        ("request_latency", None if request.error else request.end_ms - request.start_ms, "ms"),
        ("output_sequence_length", None if request.error else request.output_tokens, "tokens"),
    ):
        if value is not None:
            metrics[name] = {"value": value, "unit": unit}
    return {
        "metadata": {
            "x_request_id": f"request-{index}",
            "request_start_ns": T0 + round(request.start_ms * 1e6),
            "request_end_ns": T0 + round(request.end_ms * 1e6),
            "benchmark_phase": request.phase,
        },
        "metrics": metrics,
        **({"error": {"code": 500, "type": "InternalServerError", "message": request.error}} if request.error else {}),
    }


def _stats(values: list[float]) -> dict:
    stats = Stats.of(values or [0.0])
    return {"unit": "ms", "avg": stats.mean, **stats.model_dump(exclude={"mean"})}


def write(folder: Path, requests: list[Request], slos: dict | None = None, aiperf_goodput: float | None = None) -> Path:
    """The artifacts of one level; `slos`: what aiperf was asked for (--goodput), in its summary's input_config."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(record(request, i)) for i, request in enumerate(requests)]
    (folder / aiperf.RECORDS).write_text("\n".join(lines) + "\n")
    measured = [r for r in requests if r.phase == "profiling"]
    ok = [r for r in measured if r.error is None]
    summary = {
        "benchmark_duration": {"unit": "sec", "avg": 1.0},
        "time_to_first_token": _stats([r.ttft_ms for r in ok if r.ttft_ms is not None]),
        "inter_token_latency": _stats([r.itl_ms for r in ok if r.itl_ms is not None]),
        "request_latency": _stats([r.end_ms - r.start_ms for r in ok]),
        "output_token_throughput": {"unit": "tokens/sec", "avg": 100.0},
        "request_throughput": {"unit": "requests/sec", "avg": float(len(ok))},
        "input_config": {"slos": slos} if slos else {},
        **({"goodput": {"unit": "requests/sec", "avg": aiperf_goodput}} if aiperf_goodput is not None else {}),
    }
    (folder / aiperf.SUMMARY).write_text(json.dumps(summary))
    return folder
