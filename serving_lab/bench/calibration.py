"""The client's own overhead per request: aiperf against the local fake server, whose injected
latencies and per-request timings are known, at the concurrency a real run uses.

overhead = what the client measured - what the server did, request by request (joined on the
X-Request-ID header aiperf sends). It includes loopback TCP, the client's SSE parsing and the
scheduling of both processes on this machine: the floor under every figure a run reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from . import aiperf, offline_tokenizer
from .results import ClientOverhead, Level, Stats

if TYPE_CHECKING:
    from .fake_server import Delays, RequestRecord

MODEL = "calibration-model"
# A typical served model's figures: a few hundred ms to the first token, ~20-30 ms between tokens.
DEFAULT_TTFT_MS, DEFAULT_ITL_MS = 500.0, 25.0
# Every Hugging Face hub access fails at once (a closed local port): proof nothing is downloaded.
OFFLINE_ENV = {"HF_ENDPOINT": "http://127.0.0.1:9"}


def measure(
    executable: str,
    work_dir: Path,
    concurrency: int = 64,
    *,
    delays: Delays | None = None,
    input_tokens: int = 256,
    output_tokens: int = 32,
    requests_per_stream: int = 3,
    random_seed: int = 42,
    client_env: dict | None = None,
) -> tuple[ClientOverhead, Level]:
    """`client_env`: what aiperf needs to run here (the rehearsal's PYTHONPATH of its own tree), the same
    environment the measured runs get."""
    delays = delays or _default_delays()
    workload = aiperf.Workload(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=concurrency,
        request_count=max(16, concurrency * requests_per_stream),
        warmup_requests=concurrency,
        random_seed=random_seed,
        request_timeout_seconds=120,
    )
    artifacts, records = _against_fake_server(executable, Path(work_dir), workload, delays, client_env)
    level = aiperf.parse(artifacts, concurrency)
    return _overhead(aiperf.requests(artifacts), records, concurrency, delays), level


def _default_delays() -> Delays:
    # The fake server needs aiohttp, which the ops-only venv (verify runner, pipeline steps) lacks:
    # imported here, so `python -m ops` loads without it.
    from .fake_server import Delays

    return Delays(ttft_ms=DEFAULT_TTFT_MS, itl_ms=DEFAULT_ITL_MS)


def _against_fake_server(
    executable: str, work_dir: Path, workload: aiperf.Workload, delays: Delays, client_env: dict | None
) -> tuple[Path, list[RequestRecord]]:
    """One aiperf run against the fake server: its artifacts' folder and the server's records."""
    from .fake_server import FakeOpenAIServer  # aiohttp: see _default_delays

    tokenizer = offline_tokenizer.build(work_dir / "tokenizer")
    artifacts = work_dir / f"calibration-c{workload.concurrency}"
    with FakeOpenAIServer(MODEL, delays) as server:
        aiperf.run(
            aiperf.command(
                executable,
                url=server.url,
                model=MODEL,
                tokenizer=str(tokenizer),
                workload=workload,
                artifact_dir=artifacts,
            ),
            artifacts,
            env={**(client_env or {}), **OFFLINE_ENV},
            timeout=600,
        )
        return artifacts, server.records


def _overhead(
    measured: list[aiperf.RequestMetrics], records: list[RequestRecord], concurrency: int, delays: Delays
) -> ClientOverhead:
    """Client - server, request by request (joined on X-Request-ID); unmatched or failed requests left out."""
    served = {record.request_id: record for record in records if record.request_id}
    ttft, itl, e2e = [], [], []
    for request in measured:
        record = served.get(request.request_id or "")  # no id: no match ("" is never a key of served)
        if record is None or request.error or record.ttft_s is None or request.ttft_ms is None:
            continue
        ttft.append(request.ttft_ms - record.ttft_s * 1000)
        if request.itl_ms is not None and record.itl_s is not None:
            itl.append(request.itl_ms - record.itl_s * 1000)
        if request.e2e_ms is not None and record.last_token is not None:
            e2e.append(request.e2e_ms - (record.last_token - record.received) * 1000)
    if not ttft:
        raise aiperf.BenchError("calibration: no client request could be matched to a server record")
    return ClientOverhead(
        concurrency=concurrency,
        server_max_inflight=max(r.inflight for r in records),
        requests=len(ttft),
        injected_ttft_ms=delays.ttft_ms,
        injected_itl_ms=delays.itl_ms,
        ttft_ms=Stats.of(ttft),
        itl_ms=Stats.of(itl),
        e2e_ms=Stats.of(e2e),
    )
