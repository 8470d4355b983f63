"""What the benchmark tests measure but do not gate on.

Latency accuracy (reported - injected) and the client's overhead depend on how busy the machine is:
the calibration's median TTFT read +7 ms on a quiet 2-core machine, +29 ms with a busy loop per core
(and `assert 165.0 == 150 +- 15` once failed a fresh clone on a loaded one). The tests gate on
what cannot depend on load (counts, relations, the causal lower bounds below) and `report` the
accuracy figures instead: they are printed in pytest's terminal summary, under "benchmark accuracy".
"""

from __future__ import annotations

from serving_lab.bench.results import Stats

# The slack of a causal lower bound: a client cannot see a token before the fake server sends it, and
# the server never sends one before its slot, so reported >= injected exactly; 0.01 ms covers the
# rounding of exported values (3 decimals) and nothing else: no scheduling, no load.
EPSILON_MS = 0.01

LINES: list[str] = []


def report(line: str) -> None:
    LINES.append(line)


def accuracy(name: str, stats: Stats, injected_ms: float) -> str:
    """`TTFT p50 152.3 ms vs 150 injected (+1.5%), p99 171.0` for the summary."""
    return (
        f"{name} p50 {stats.p50:.2f} ms vs {injected_ms:g} injected "
        f"({(stats.p50 - injected_ms) / injected_ms:+.1%}), p99 {stats.p99:.2f}"
    )


def assert_ordered(stats: Stats, *, may_be_zero: bool = False) -> None:
    """Percentiles of one distribution: positive and in order, whatever the load. `may_be_zero` for an
    inter-token latency: a request's ITL is (last token - first token) / (tokens - 1) as the client reads
    them, and a client that is late for the first token (a loaded machine descheduling it for the length
    of the stream) reads every token at once: its ITL is 0.0 though the server sent them apart (seen under
    load: ITL min 0.0 in a fresh-clone run). Only TTFT and E2E have a causal lower bound; ITL's is 0."""
    low_ok = stats.min >= 0 if may_be_zero else stats.min > 0
    assert low_ok and stats.min <= stats.p50 <= stats.p90 <= stats.p99 <= stats.max, stats
