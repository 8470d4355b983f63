"""Goodput (DistServe, OSDI 2024): requests per second that meet both latency objectives, counted from
aiperf's per-request records, never from its summary.

Per level (one aiperf run: a profile at one concurrency or one request rate), over the measured requests
(aiperf's profile_export.jsonl, the warm-up phase left out):

    good      = requests that succeeded with  TTFT <= ttft objective  AND  ITL <= itl objective
    duration  = max(request_end_ns) - min(request_start_ns) over every measured request, failed ones too
                (the first request's start to the last one's end, aiperf's wall-clock record metadata)
    goodput   = good / duration  (requests/s)

ITL is aiperf's per-request inter_token_latency, (end-to-end - TTFT) / (output tokens - 1): the mean gap of
that request, DistServe's TPOT, not each gap. A request of one output token has no gap: it meets the ITL
objective, as in DistServe (its TPOT is 0: evaluation/2-benchmark-serving/structs.py, RequestResult); aiperf's
own count leaves it out (no inter_token_latency). Both bounds are inclusive (DistServe's count_valid_results
and aiperf's good_request_count both use <=).

The objectives come from the stage (config/schema.py): benchmark.slo.ttft_seconds, by default
observability.ttft_p99_slo_seconds, and benchmark.slo.itl_seconds (0.1 s); --slo-ttft / --slo-itl override.

aiperf 0.13.0 computes a goodput too when given --goodput: aiperf/metrics/types/good_request_count_metric.py
marks each record good when every objective holds (<=; the record's good_request_count, 0 or 1) and
goodput_metric.py divides their count by the observation duration (aiperf/metrics/metric_dicts.py), which
for the exported summary is the profiling phase's window (aiperf/metrics/accumulator.py,
_summarize_for_export_context: the phase's start to its end, phase_manifest.json), not the requests' span.
We pass it the same objectives (runner.py) and keep its figure beside ours (Goodput.aiperf_per_s): the good
counts agree request by request (tests/serving_lab/bench/test_goodput.py checks it on a real aiperf run); the
rates differ by the duration only (aiperf's window opens before the first arrival). The report ranks by ours.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from . import aiperf
from .results import Goodput, Level, RateLevel, Run, level_name

MS = 1000.0


@dataclass(frozen=True)
class Objectives:
    """The two objectives, in ms (the unit of aiperf's records)."""

    ttft_ms: float
    itl_ms: float

    @classmethod
    def of_stage(cls, cfg, ttft_seconds: float | None = None, itl_seconds: float | None = None) -> Objectives:
        """The stage's: benchmark.slo, its TTFT by default observability.ttft_p99_slo_seconds; the arguments
        (the command line's --slo-ttft, --slo-itl) override."""
        slo = cfg.benchmark.slo
        ttft = ttft_seconds or slo.ttft_seconds or cfg.observability.ttft_p99_slo_seconds
        return cls.of_seconds(ttft, itl_seconds or slo.itl_seconds)

    @classmethod
    def of_seconds(cls, ttft_seconds: float, itl_seconds: float) -> Objectives:
        # Rounded to a ns: 1.1 s is 1100 ms, not 1100.0000000000002, so objectives compare equal.
        return cls(ttft_ms=round(ttft_seconds * MS, 6), itl_ms=round(itl_seconds * MS, 6))

    @classmethod
    def of_settings(cls, settings: dict) -> Objectives | None:
        """The objectives a run recorded (settings.slo), or None."""
        slo = settings.get("slo")
        if not isinstance(slo, dict):
            return None
        ttft, itl = slo.get("ttft_seconds"), slo.get("itl_seconds")
        if not (_positive_number(ttft) and _positive_number(itl)):
            return None
        return cls.of_seconds(ttft, itl)

    def settings(self) -> dict:
        """settings.slo of a run: seconds, as in the stage file."""
        return {"ttft_seconds": self.ttft_ms / MS, "itl_seconds": self.itl_ms / MS}

    def aiperf(self) -> tuple[float, float]:
        """aiperf's --goodput values (aiperf.command)."""
        return self.ttft_ms, self.itl_ms

    def of(self, goodput: Goodput) -> bool:
        """Whether `goodput` was counted under these objectives."""
        return (goodput.ttft_slo_ms, goodput.itl_slo_ms) == (self.ttft_ms, self.itl_ms)

    @property
    def title(self) -> str:
        return f"TTFT <= {_ms(self.ttft_ms)} and ITL <= {_ms(self.itl_ms)}"


def _positive_number(value: object) -> TypeGuard[float]:
    """A number above 0 (int or float, not a bool) as JSON holds it."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _ms(value: float) -> str:
    return f"{value / MS:g} s" if value >= MS else f"{value:g} ms"


def is_good(request: aiperf.RequestMetrics, objectives: Objectives) -> bool:
    """A request that succeeded with TTFT and ITL within the objectives (see the module's docstring)."""
    if request.error is not None or request.ttft_ms is None or request.ttft_ms > objectives.ttft_ms:
        return False
    if request.itl_ms is None:
        return request.output_tokens == 1  # no gap to be late; a missing figure otherwise is no pass
    return request.itl_ms <= objectives.itl_ms


def count(
    measured: Iterable[aiperf.RequestMetrics], objectives: Objectives, aiperf_per_s: float | None = None
) -> Goodput | None:
    """The goodput of one level's measured requests; None when no request has both timestamps."""
    measured = list(measured)
    spans = [(r.start_ns, r.end_ns) for r in measured if r.start_ns is not None and r.end_ns is not None]
    if not spans:
        return None
    duration_s = max(0, max(end for _, end in spans) - min(start for start, _ in spans)) / 1e9
    good = sum(is_good(r, objectives) for r in measured)
    return Goodput(
        ttft_slo_ms=objectives.ttft_ms,
        itl_slo_ms=objectives.itl_ms,
        good=good,
        requests=len(measured),
        duration_s=duration_s,
        per_s=good / duration_s if duration_s > 0 else 0.0,
        aiperf_per_s=aiperf_per_s,
    )


def aiperf_goodput(summary: dict, objectives: Objectives) -> float | None:
    """aiperf's own goodput from its summary, only when it was run with exactly these objectives."""
    asked = (summary.get("input_config") or {}).get("slos") or {}
    if asked != {"time_to_first_token": objectives.ttft_ms, "inter_token_latency": objectives.itl_ms}:
        return None
    value = (summary.get("goodput") or {}).get("avg")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def of_folder(artifact_dir: Path, objectives: Objectives, *, closed_loop: bool = False) -> Goodput | None:
    """The goodput of one level from the aiperf artifacts in `artifact_dir`, with its interval (`bootstrap`;
    `closed_loop`: a concurrency level); None without its records."""
    artifact_dir = Path(artifact_dir)
    if not (artifact_dir / aiperf.RECORDS).is_file():
        return None
    try:
        summary = aiperf.read_summary(artifact_dir)
    except aiperf.BenchError:
        summary = {}
    measured = aiperf.requests(artifact_dir)
    found = count(measured, objectives, aiperf_goodput(summary, objectives))
    interval = bootstrap(measured, objectives, closed_loop=closed_loop)
    if found is None or interval is None:
        return found
    return found.model_copy(
        update={"low_per_s": interval.low, "high_per_s": interval.high, "confidence": interval.confidence}
    )


def artifacts(run_path: Path, profile: str, level: Level | RateLevel) -> Path:
    """Where `ops bench` (and `ops rehearse --bench`) wrote a level's aiperf artifacts: beside the run's
    JSON, <time>-<label>/<profile>-c<concurrency> or <profile>-r<rate>."""
    return Path(run_path).with_suffix("") / level_name(profile, level)


def recount(run: Run, run_path: Path, objectives: Objectives) -> tuple[Run, list[str]]:
    """`run` with every level's goodput counted anew from the records beside `run_path` under `objectives`
    (settings.slo set to them), and the levels that have no records there: those keep a goodput they
    recorded under the same objectives, and lose one counted under others."""
    missing: list[str] = []
    profiles = []
    for profile in run.profiles:
        updated = {}
        for kind in ("levels", "rate_levels"):
            levels = []
            for level in getattr(profile, kind):
                found = of_folder(artifacts(run_path, profile.name, level), objectives, closed_loop=kind == "levels")
                if found is None:
                    missing.append(level_name(profile.name, level))
                    kept = level.goodput if level.goodput is not None and objectives.of(level.goodput) else None
                    found = kept
                levels.append(level.model_copy(update={"goodput": found}))
            updated[kind] = levels
        profiles.append(profile.model_copy(update=updated))
    settings = {**run.settings, "slo": objectives.settings()}
    return run.model_copy(update={"profiles": profiles, "settings": settings}), missing


def best(levels: Iterable[Level | RateLevel], objectives: Objectives) -> Level | RateLevel | None:
    """The level of highest goodput under `objectives` (the first of equals, concurrency levels before rate
    levels in the order given); None when no level has one."""
    counted = [(level, level.goodput) for level in levels if level.goodput is not None and objectives.of(level.goodput)]
    top = max(counted, key=lambda pair: pair[1].per_s, default=None)
    return None if top is None else top[0]


# A benchmark whose figures hold on a rerun (issue #35): a level is defined by its request count, its goodput
# comes with a bootstrap interval, and a level whose TTFT p50 sits near the TTFT objective is flagged.
# These are the rules (docs/BENCHMARK.md, "Figures that hold on a rerun", with the H200 runs that flipped).
MIN_REQUESTS = 100  # a level's fewest finished requests for its goodput to be stated without a caveat
UNSTABLE_MARGIN = 0.20  # TTFT p50 within 20 % of the TTFT objective, either side
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 35


@dataclass(frozen=True)
class Interval:
    """A goodput (requests/s) and its percentile bootstrap interval at `confidence`."""

    per_s: float
    low: float
    high: float
    confidence: float
    requests: int

    @property
    def enough(self) -> bool:
        """Measured on at least MIN_REQUESTS requests."""
        return self.requests >= MIN_REQUESTS

    def text(self) -> str:
        caveat = "" if self.enough else f"; {self.requests} requests, under {MIN_REQUESTS}"
        return f"{self.per_s:.2f}/s ({self.confidence:.0%} {self.low:.2f}-{self.high:.2f}{caveat})"


def bootstrap(
    measured: Iterable[aiperf.RequestMetrics],
    objectives: Objectives,
    *,
    closed_loop: bool = False,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """The level's goodput (as `count` has it) and a percentile bootstrap interval: the measured requests drawn
    with replacement `resamples` times, each draw's good requests over the level's duration (the span is the
    level's: the load ran that long). `closed_loop` (a concurrency level, whose rate is its streams over their
    mean latency, Little's law): each draw's rate is also scaled by the measured mean latency over the draw's, so
    the latencies' spread widens the interval too (else a level whose every request was good has none); an
    open-loop level's rate is its arrivals'. Seeded: the same records give the same interval; None when `count`
    has no goodput."""
    measured = list(measured)
    found = count(measured, objectives)
    if found is None or found.duration_s <= 0:
        return None
    good = [is_good(r, objectives) for r in measured]
    latency = _latencies(measured) if closed_loop else None
    rng = random.Random(seed)
    n = len(good)
    draws = []
    for _ in range(resamples):
        picked = [rng.randrange(n) for _ in range(n)]
        rate = sum(good[i] for i in picked) / found.duration_s
        if latency is not None:
            rate *= sum(latency) / sum(latency[i] for i in picked)
        draws.append(rate)
    draws.sort()
    tail = (1 - confidence) / 2
    low = min(found.per_s, draws[min(resamples - 1, int(tail * resamples))])
    high = max(found.per_s, draws[min(resamples - 1, int((1 - tail) * resamples))])
    return Interval(per_s=found.per_s, low=low, high=high, confidence=confidence, requests=n)


@dataclass(frozen=True)
class Median:
    """A latency's median over a level's requests (ms) and its percentile bootstrap interval at `confidence`."""

    ms: float
    low: float
    high: float
    confidence: float
    samples: int

    def text(self) -> str:
        places = 2 if self.high < 10 else 1  # an ITL of a few ms needs its hundredths
        return f"{self.ms:.{places}f} ms ({self.confidence:.0%} {self.low:.{places}f}-{self.high:.{places}f})"

    def apart_from(self, other: Median) -> bool:
        """The two intervals do not overlap: a rerun keeps which median is lower."""
        return self.high < other.low or other.high < self.low


def median_bootstrap(
    values: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Median | None:
    """The median of `values` and its percentile bootstrap interval (each draw's median over `resamples` draws with
    replacement); seeded, as `bootstrap`; None without values."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    draws = sorted(statistics.median(values[rng.randrange(n)] for _ in range(n)) for _ in range(resamples))
    tail = (1 - confidence) / 2
    low, high = draws[int(tail * resamples)], draws[min(resamples - 1, int((1 - tail) * resamples))]
    return Median(statistics.median(values), low, high, confidence, n)


def _latencies(measured: list[aiperf.RequestMetrics]) -> list[float] | None:
    """Each request's start-to-end time (failed ones too); None unless every request has both timestamps."""
    spans = [r.end_ns - r.start_ns for r in measured if r.start_ns is not None and r.end_ns is not None]
    return [float(span) for span in spans] if len(spans) == len(measured) and min(spans, default=0) > 0 else None


def interval_of(found: Goodput | None) -> Interval | None:
    """The interval a level's goodput recorded (of_folder); None for one counted without it."""
    if found is None or found.low_per_s is None or found.high_per_s is None or found.confidence is None:
        return None
    return Interval(found.per_s, found.low_per_s, found.high_per_s, found.confidence, found.requests)


def level_unstable(level: Level | RateLevel) -> bool:
    """The level's TTFT p50 near the TTFT objective its goodput was counted under (False without a goodput)."""
    found = level.goodput
    return found is not None and unstable(level.ttft_ms.p50, Objectives(found.ttft_slo_ms, found.itl_slo_ms))


def unstable(ttft_p50_ms: float, objectives: Objectives, margin: float = UNSTABLE_MARGIN) -> bool:
    """TTFT p50 within `margin` of the TTFT objective (either side): a rerun can flip most requests' verdicts."""
    return abs(ttft_p50_ms - objectives.ttft_ms) <= margin * objectives.ttft_ms


def ratio(a: Interval | None, b: Interval | None) -> str | None:
    """`a` over `b` with both intervals, e.g. "2.10x (a 1.20/s, 95% 1.0-1.4; b 0.57/s, 95% 0.4-0.7)"; None where
    either has no interval or `b` is 0 (a ratio is never stated without both)."""
    if a is None or b is None or b.per_s <= 0:
        return None
    return f"{a.per_s / b.per_s:.2f}x (a {a.text()}; b {b.text()})"
