"""Where a request's time to first token goes, request by request: the rounds of `--ttft-phases`.

A round sends N streaming requests of ~750 prompt tokens, one at a time or `concurrency` at a time, each with an
X-Request-Id of its own. The client times each one's TTFT (send -> first content chunk), and the engines' own spans
of that request (serving_lab/rehearse/traces.py) split it phase by phase. An engine's spans leave in its
OpenTelemetry batch processor's next export, so a round waits for them after its last request, up to SPAN_WAIT_S.

The breakdown from the means of vLLM's and Serve's histograms is gone: Ray rebuilds a histogram's sum from its
buckets' midpoints, so those means were bucket middles, and the spans arrived for every request on an H200
(evidence/2026-12-05-h200-phases)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .traces import PerRequest

# The OpenTelemetry SDK's BatchSpanProcessor exports every 5 s (opentelemetry/sdk/trace/export/__init__.py,
# _DEFAULT_SCHEDULE_DELAY_MILLIS): two exports and a margin.
SPAN_WAIT_S = 12.0
SPAN_POLL_S = 0.5


@dataclass
class Round:
    """One round: the client's TTFT of each request, `concurrency` at a time, and their phases where joined."""

    client_ttft_s: list[float]
    concurrency: int = 1
    per_request: PerRequest | None = None

    @property
    def fully_joined(self) -> bool:
        """Every request has every span."""
        joined = self.per_request
        return joined is not None and bool(joined.rows) and joined.complete == len(joined.rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": len(self.client_ttft_s),
            "concurrency": self.concurrency,
            "client_ttft_s": [round(x, 4) for x in self.client_ttft_s],
            "client_ttft_median_s": round(statistics.median(self.client_ttft_s), 4) if self.client_ttft_s else None,
            **({"per_request": self.per_request.to_json()} if self.per_request is not None else {}),
        }

    def lines(self) -> list[str]:
        out = []
        if self.client_ttft_s:
            out.append(
                f"client TTFT median {statistics.median(self.client_ttft_s) * 1000:.1f} ms over "
                f"{len(self.client_ttft_s)} streams, {self.concurrency} at a time"
            )
        if self.per_request is None:
            return out + ["no phases: the span receiver is not running"]
        return out + self.per_request.lines()


def send_round(send: Callable[[int], float], *, requests: int, concurrency: int = 1) -> list[float]:
    """Request i's TTFT for each i, sent `concurrency` at a time."""
    if concurrency <= 1:
        return [send(i) for i in range(requests)]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(send, range(requests)))


def settle(
    joined: Callable[[], PerRequest],
    *,
    timeout: float = SPAN_WAIT_S,
    wait: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> PerRequest:
    """The round joined with the spans once every request has them, or as they stand after `timeout`."""
    deadline = clock() + timeout
    while True:
        found = joined()
        if found.complete == len(found.rows) or clock() >= deadline:
            return found
        wait(SPAN_POLL_S)
