"""The KV cache's transfer rate from NIXL's own Prometheus exporter: two scrapes of one agent's /metrics (before
and after some requests) give the bytes it received, the transfers it timed, their summed start-to-complete time,
and so the rate per transfer. Pure (text in, numbers out), so `ops verify` and the GPU rehearsal share it.

The counters (ai-dynamo/nixl src/plugins/telemetry/prometheus/README.md, "Metrics & Events": a counter's name ends
in _total, labelled with the agent's name and host): `agent_rx_bytes_total` (bytes the agent received: in PD the
decode engine reads the prefill engine's KV blocks, so every KV byte is its rx), `agent_rx_requests_num_total`
(its transfer requests) and `agent_xfer_time_total` (microseconds from a request's start to its completion, summed
over requests). Each is summed over its series (one agent per engine process).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from . import nixl
from .report import Status

RX_BYTES = "agent_rx_bytes_total"
RX_REQUESTS = "agent_rx_requests_num_total"
XFER_TIME_US = "agent_xfer_time_total"
COUNTERS = (RX_BYTES, RX_REQUESTS, XFER_TIME_US)
# The text format's sample line: name, optional {labels}, value, optional timestamp (Prometheus exposition format).
# A common English word is one token in the tokenizers of the served models (Qwen's BPE among them): the prompt
# is about as many tokens as words, and a few under the profile's size so that it fits max_model_len.
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "cold",
    "rain",
    "falls",
    "on",
    "old",
    "stone",
    "walls",
]
_MARGIN = 32
# NIXL hands the events it buffered to the exporter every 100 ms (ai-dynamo/nixl src/core/telemetry/telemetry.cpp,
# DEFAULT_TELEMETRY_RUN_INTERVAL; NIXL_TELEMETRY_RUN_INTERVAL, which nothing here sets): a scrape just after a
# request can miss its transfer (seen on an H100, 2026-12-05: "1 of 3 long-prompt requests moved no KV bytes").
# So a scrape is taken again after more than one interval, until two agree.
EXPORT_PAUSE_S = 0.15
SETTLE_TRIES = 10
Scraped = TypeVar("Scraped", str, Mapping[str, str])
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?\s+(\S+)(?:\s+-?\d+)?\s*$")


class RateError(ValueError):
    """Two scrapes that give no rate: not NIXL's exporter, or a counter that went backwards."""


@dataclass(frozen=True)
class Rate:
    bytes: int
    transfers: int
    seconds: float

    @property
    def moved(self) -> bool:
        return self.bytes > 0

    @property
    def gbps(self) -> float | None:
        """Gigabits per second of transfer time; None when no transfer time was counted."""
        return self.bytes * 8 / self.seconds / 1e9 if self.seconds > 0 else None


def counters(text: str) -> dict[str, float]:
    """The three counters of one scrape, each summed over its series; a RateError when one is missing."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip()) if line.strip() and not line.startswith("#") else None
        if match and match.group(1) in COUNTERS:
            try:
                value = float(match.group(2))
            except ValueError:
                raise RateError(f"{match.group(1)} has a value that is not a number: {match.group(2)[:40]!r}") from None
            found[match.group(1)] = found.get(match.group(1), 0.0) + value
    missing = [name for name in COUNTERS if name not in found]
    if missing:
        raise RateError(f"no {', '.join(missing)} in the answer: not NIXL's Prometheus exporter")
    return found


def _readings(answer: str | Mapping[str, str]) -> list[object]:
    """The counters of each exporter in one scrape, or its text where it holds none (compared, not judged)."""
    texts = list(answer.values()) if isinstance(answer, Mapping) else [answer]
    found: list[object] = []
    for text in texts:
        try:
            found.append(counters(text))
        except RateError:
            found.append(text)
    return found


def settled(scrape: Callable[[], Scraped], sleep: Callable[[float], None] = time.sleep) -> Scraped:
    """`scrape()` once NIXL has exported every transfer it buffered: taken again EXPORT_PAUSE_S later until two
    scrapes agree on the counters (SETTLE_TRIES at most; then the last)."""
    last = scrape()
    for _ in range(SETTLE_TRIES):
        sleep(EXPORT_PAUSE_S)
        now = scrape()
        if _readings(now) == _readings(last):
            return now
        last = now
    return last


def rate(before: str, after: str) -> Rate:
    """What one agent moved between two scrapes of its exporter."""
    old, new = counters(before), counters(after)
    delta = {name: new[name] - old[name] for name in COUNTERS}
    backwards = [name for name, value in delta.items() if value < 0]
    if backwards:
        raise RateError(f"{backwards[0]} went backwards between the scrapes: the engine restarted in between")
    return Rate(bytes=round(delta[RX_BYTES]), transfers=round(delta[RX_REQUESTS]), seconds=delta[XFER_TIME_US] / 1e6)


def gate_prompt(tokens: int, nonce: str) -> str:
    """About `tokens` tokens, opening with `nonce` so that no engine finds any of it in its prefix cache (a
    cached prefix would not cross NIXL)."""
    count = max(1, tokens - _MARGIN)
    return f"{nonce}: " + " ".join(_WORDS[i % len(_WORDS)] for i in range(count))


@dataclass(frozen=True)
class Round:
    """One request: what each agent received meanwhile, by worker (a pod, or a rehearsal's engine)."""

    rates: Mapping[str, Rate]


@dataclass(frozen=True)
class Fixes:
    """What to do on each failing verdict, in the words of the place the gate runs (a cluster, a GPU host)."""

    none: str  # no worker received anything
    idle: str  # a request moved nothing to the receiver
    slow: str  # the median is under the floor; formatted with {where}, the backend and provider as logged


def receiver(done: list[Round]) -> str | None:
    """The worker whose agent received the KV cache (in PD the decode engine reads it): the most bytes."""
    moved: dict[str, int] = {}
    for one in done:
        for worker, found in one.rates.items():
            moved[worker] = moved.get(worker, 0) + found.bytes
    most = max(moved, key=lambda name: moved[name], default=None)
    return most if most is not None and moved[most] > 0 else None


def _summary(worker: str, rates: list[Rate], floor: float, backend: nixl.NixlFinding | None) -> dict[str, object]:
    gbps = sorted(found.gbps or 0.0 for found in rates)
    return {
        "pod": worker,
        "bytes": sum(found.bytes for found in rates),
        "transfers": sum(found.transfers for found in rates),
        "median_gbps": round(statistics.median(gbps), 3),
        "worst_gbps": round(gbps[0], 3),
        "floor_gbps": floor,
        "backend": backend.detail if backend else "not read (the transport check found no logs for this worker)",
    }


def judge(
    done: list[Round], floor: float, backend: nixl.NixlFinding | None, fixes: Fixes
) -> tuple[Status, str, str, dict[str, object]]:
    """(status, detail, fix, data) of the gate over the rounds: no transfer, wrong backend, slow, or a pass."""
    worker = receiver(done)
    if worker is None:
        detail = f"{len(done)} long-prompt requests moved no KV bytes over NIXL (no worker's {RX_BYTES} rose)"
        return "fail", detail, fixes.none, {}
    rates = [one.rates[worker] for one in done]
    idle = sum(1 for found in rates if not found.moved or found.gbps is None)
    if idle:
        return (
            "fail",
            f"{idle} of {len(done)} long-prompt requests moved no KV bytes to {worker}",
            fixes.idle,
            {"pod": worker},
        )
    data = _summary(worker, rates, floor, backend)
    summary = (
        f"{worker}: {data['bytes']:,} bytes in {len(done)} requests, per transfer median {data['median_gbps']:g} "
        f"Gbps, worst {data['worst_gbps']:g} (floor {floor:g})"
    )
    if backend is not None and not backend.ok:
        return (
            "fail",
            f"wrong backend: {summary}, over {backend.detail}",
            nixl.advice(backend) or fixes.slow.format(where=backend.detail),
            data,
        )
    if statistics.median(found.gbps or 0.0 for found in rates) < floor:
        where = backend.detail if backend else "the provider"
        return "fail", f"slow transfer: {summary}", fixes.slow.format(where=where), data
    return "pass", f"{summary}; {data['backend']}", "", data
