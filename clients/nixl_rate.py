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
from dataclasses import dataclass

RX_BYTES = "agent_rx_bytes_total"
RX_REQUESTS = "agent_rx_requests_num_total"
XFER_TIME_US = "agent_xfer_time_total"
COUNTERS = (RX_BYTES, RX_REQUESTS, XFER_TIME_US)
# The text format's sample line: name, optional {labels}, value, optional timestamp (Prometheus exposition format).
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


def rate(before: str, after: str) -> Rate:
    """What one agent moved between two scrapes of its exporter."""
    old, new = counters(before), counters(after)
    delta = {name: new[name] - old[name] for name in COUNTERS}
    backwards = [name for name, value in delta.items() if value < 0]
    if backwards:
        raise RateError(f"{backwards[0]} went backwards between the scrapes: the engine restarted in between")
    return Rate(bytes=round(delta[RX_BYTES]), transfers=round(delta[RX_REQUESTS]), seconds=delta[XFER_TIME_US] / 1e6)
