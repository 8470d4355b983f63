"""One benchmark run of a stage: every profile of its `benchmark` section (or the ones asked for), at
each concurrency level, through aiperf, saved as one results JSON beside aiperf's own artifacts."""

from __future__ import annotations

import datetime as dt
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from config.instance_types import INSTANCE_TYPES
from config.schema import StageConfig, WorkloadProfile

from . import aiperf, calibration, goodput
from .results import ClientOverhead, Hardware, Level, ProfileRun, RateLevel, Run

# A level of the request-rate sweep sends max(16, rate x RATE_LEVEL_SECONDS) requests (about a minute of
# arrivals; `bench --rate-seconds` changes it), after a warm-up of rate x 1 s (1 to 16) requests at the
# same rate.
RATE_LEVEL_SECONDS = 60.0
# A concurrency level sends at least this many measured requests (more when the profile's streams x
# requests_per_stream is more), so that its goodput is stated without a caveat (goodput.MIN_REQUESTS).
MIN_LEVEL_REQUESTS = goodput.MIN_REQUESTS


def rate_request_count(request_rate: float, seconds: float = RATE_LEVEL_SECONDS) -> int:
    return max(16, math.ceil(request_rate * seconds))


def rate_warmup(request_rate: float) -> int:
    return min(16, max(1, math.ceil(request_rate)))


def hardware(cfg: StageConfig) -> Hardware:
    spec = INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]
    return Hardware(
        instance_type=cfg.gpu_nodegroup.instance_type,
        gpu_nodes=cfg.gpu_nodegroup.count,
        gpus_per_node=spec.gpus,
        gpu=spec.gpu_model,
        efa_interfaces=spec.efa_interfaces if cfg.gpu_nodegroup.efa else 0,
        availability_zone=cfg.gpu_availability_zone,
    )


def settings(cfg: StageConfig, tokenizer: str, objectives: goodput.Objectives | None = None) -> dict:
    serving = cfg.serving
    objectives = objectives or goodput.Objectives.of_stage(cfg)
    return {
        "mode": serving.mode,
        "engine": serving.engine.model_dump(),
        "kv_backend": serving.kv_backend if serving.mode == "pd" else None,
        "prefill": serving.prefill.model_dump(exclude_none=True) if serving.mode == "pd" else None,
        "decode": serving.decode.model_dump(exclude_none=True) if serving.mode == "pd" else None,
        "ray_version": serving.ray_version,
        "tokenizer": tokenizer,
        "random_seed": cfg.benchmark.random_seed,
        "request_timeout_seconds": cfg.benchmark.request_timeout_seconds,
        "slo": objectives.settings(),
    }


def select(cfg: StageConfig, names: Sequence[str] = ()) -> list[WorkloadProfile]:
    """The stage's profiles, or the named ones (unknown names are an error naming the allowed ones)."""
    profiles = list(cfg.benchmark.profiles)
    if not names:
        return profiles
    known = {profile.name: profile for profile in profiles}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise aiperf.BenchError(
            f"benchmark.profiles: no profile {unknown[0]!r} in stage {cfg.stage} (allowed: {', '.join(known)})"
        )
    return [known[name] for name in names]


@dataclass(frozen=True)
class Adjustments:
    """What `ops rehearse` (and `bench --request-rates`, `--sweep`) changes about a stage run, recorded in
    the results' settings: the host's hardware instead of the stage's nodes, a subset of the levels (an
    empty one: no concurrency sweep), other request rates than the profiles' (an empty list: no rate
    sweep), fewer requests per stream, the engine overrides, a deadline after which no new level starts
    (the run so far is kept), and a time bound per level (requests in flight when it ends may finish
    within their timeout and are counted)."""

    hardware: Hardware | None = None
    levels: Sequence[int] | None = None
    request_rates: Sequence[float] | None = None  # instead of each profile's request_rates
    rate_seconds: float | None = None  # instead of RATE_LEVEL_SECONDS
    requests_per_stream: int | None = None
    deadline: float | None = None  # time.monotonic() value
    level_seconds: float | None = None  # each level stops sending after this long (aiperf --benchmark-duration)
    # a concurrency level sends at least this many measured requests: a level is defined by its request count
    # (goodput.MIN_REQUESTS), or by level_seconds where that ends it first
    min_requests: int = MIN_LEVEL_REQUESTS
    client_env: dict | None = None
    recorded: dict = field(default_factory=dict)


def run_stage(
    cfg: StageConfig,
    *,
    url: str,
    executable: str,
    out_dir: Path,
    label: str | None = None,
    profile_names: Sequence[str] = (),
    tokenizer: str | None = None,
    calibrate: bool = True,
    note: str = "",
    endpoint_label: str | None = None,
    adjust: Adjustments = Adjustments(),
    objectives: goodput.Objectives | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> tuple[Run, Path]:
    """`objectives`: goodput's (default the stage's, goodput.Objectives.of_stage), counted per level from
    aiperf's records and asked of aiperf too (--goodput) for the cross-check."""
    objectives = objectives or goodput.Objectives.of_stage(cfg)
    profiles = _adjusted(cfg, select(cfg, profile_names), adjust)
    stage = _StageRun(
        cfg=cfg,
        url=url,
        executable=executable,
        tokenizer=tokenizer or cfg.benchmark.tokenizer or cfg.serving.model.source,
        label=label or cfg.serving.mode,
        note=note,
        endpoint=endpoint_label or url,
        started=now(),
        out_dir=Path(out_dir),
        adjust=adjust,
        objectives=objectives,
        progress=progress,
    )
    overhead = _calibrate(stage, profiles) if calibrate else None
    results = _results(stage, overhead, aiperf.version(executable, env=adjust.client_env))
    for profile in profiles:
        _run_profile(stage, profile, results)
    return results.run(), results.save()


@dataclass(frozen=True)
class _StageRun:
    """One run of a stage: what it measures, with what and how, and where its files go."""

    cfg: StageConfig
    url: str
    executable: str
    tokenizer: str
    label: str
    note: str
    endpoint: str  # as the results show it
    started: dt.datetime
    out_dir: Path
    adjust: Adjustments
    objectives: goodput.Objectives
    progress: Callable[[str], None]

    @property
    def run_dir(self) -> Path:
        return self.out_dir / self.cfg.stage / f"{self.started.strftime('%Y%m%dT%H%M%SZ')}-{self.label}"


def _adjusted(cfg: StageConfig, profiles: list[WorkloadProfile], adjust: Adjustments) -> list[WorkloadProfile]:
    """The profiles with the adjustments' levels, request rates and requests per stream; those left with
    no level to run dropped (none left: an error)."""
    if adjust.levels is None and adjust.requests_per_stream is None and adjust.request_rates is None:
        return profiles
    profiles = [
        profile.model_copy(
            update={
                "concurrency": [c for c in profile.concurrency if adjust.levels is None or c in adjust.levels],
                **({"requests_per_stream": adjust.requests_per_stream} if adjust.requests_per_stream else {}),
                **({"request_rates": list(adjust.request_rates)} if adjust.request_rates is not None else {}),
            }
        )
        for profile in profiles
    ]
    profiles = [profile for profile in profiles if profile.concurrency or profile.request_rates]
    if not profiles:
        asked = "no concurrency level" if not adjust.levels else f"none of the levels {list(adjust.levels)}"
        raise aiperf.BenchError(f"no profile of stage {cfg.stage} has a level to run ({asked}, no request rate)")
    return profiles


def _calibrate(stage: _StageRun, profiles: list[WorkloadProfile]) -> ClientOverhead:
    """The client's overhead against the local fake server, at the run's highest concurrency."""
    top = max(max(profile.concurrency, default=1) for profile in profiles)
    stage.progress(f"calibration: aiperf against the local fake server at concurrency {top} ...")
    overhead, _ = calibration.measure(
        stage.executable, stage.run_dir / "calibration", concurrency=top, client_env=stage.adjust.client_env
    )
    stage.progress(
        f"calibration: client overhead per request at {top} streams: TTFT +{overhead.ttft_ms.p50:.1f} ms, "
        f"ITL +{overhead.itl_ms.p50:.2f} ms, end-to-end +{overhead.e2e_ms.p50:.1f} ms (medians)"
    )
    return overhead


@dataclass
class _Results:
    """The run so far, saved after every level: an interrupted run keeps what it measured."""

    fields: dict  # Run's fields that no level changes
    settings: dict
    path: Path
    measured: list[ProfileRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def run(self) -> Run:
        return Run(
            **self.fields,
            settings={**self.settings, **({"skipped": self.skipped} if self.skipped else {})},
            profiles=[profile for profile in self.measured if profile.levels or profile.rate_levels],
        )

    def save(self) -> Path:
        return self.run().save(self.path)


def _results(stage: _StageRun, overhead: ClientOverhead | None, version: str) -> _Results:
    cfg = stage.cfg
    return _Results(
        fields={
            "label": stage.label,
            "note": stage.note,
            "created_at": stage.started.isoformat(timespec="seconds"),
            "stage": cfg.stage,
            "mode": cfg.serving.mode,
            "endpoint": stage.endpoint,
            "model_id": cfg.serving.model.id,
            "model_source": cfg.serving.model.source,
            "image": cfg.image,
            "hardware": stage.adjust.hardware or hardware(cfg),
            "client": {"name": "aiperf", "version": version, "endpoint_type": "chat", "streaming": True},
            "calibration": overhead,
        },
        settings={**settings(cfg, stage.tokenizer, stage.objectives), **stage.adjust.recorded},
        path=stage.run_dir.with_suffix(".json"),
    )


@dataclass(frozen=True)
class _Load:
    """One level of a profile's sweeps: a concurrency (closed loop) or a request rate (open loop)."""

    profile: WorkloadProfile
    concurrency: int | None
    rate: float | None

    @property
    def name(self) -> str:
        return (
            f"{self.profile.name}-c{self.concurrency}" if self.rate is None else f"{self.profile.name}-r{self.rate:g}"
        )

    @property
    def shown(self) -> str:
        return f"concurrency {self.concurrency}" if self.rate is None else f"{self.rate:g} requests/s"

    @property
    def streams(self) -> int:
        return self.concurrency or 0  # a concurrency level's (rate None) is always set; a rate level has none

    def workload(self, cfg: StageConfig, adjust: Adjustments) -> aiperf.Workload:
        profile, rate, streams = self.profile, self.rate, self.streams
        return aiperf.Workload(
            input_tokens=profile.input_tokens,
            output_tokens=profile.output_tokens,
            concurrency=streams,
            request_count=(
                max(profile.request_count(streams), adjust.min_requests)
                if rate is None
                else rate_request_count(rate, adjust.rate_seconds or RATE_LEVEL_SECONDS)
            ),
            warmup_requests=streams if rate is None else rate_warmup(rate),
            random_seed=cfg.benchmark.random_seed,
            request_timeout_seconds=cfg.benchmark.request_timeout_seconds,
            duration_seconds=adjust.level_seconds,
            request_rate=rate,
        )


def _run_profile(stage: _StageRun, profile: WorkloadProfile, results: _Results) -> None:
    """Its concurrency levels, then its request rates; a level that would start after the deadline is skipped."""
    levels: list[Level] = []
    rate_levels: list[RateLevel] = []
    results.measured.append(
        ProfileRun(
            name=profile.name,
            input_tokens=profile.input_tokens,
            output_tokens=profile.output_tokens,
            levels=levels,
            rate_levels=rate_levels,
        )
    )
    loads = [_Load(profile, c, None) for c in profile.concurrency] + [
        _Load(profile, None, r) for r in profile.request_rates
    ]
    for load in loads:
        if stage.adjust.deadline is not None and time.monotonic() >= stage.adjust.deadline:
            results.skipped.append(load.name)
            stage.progress(f"{profile.name} {load.shown}: skipped (time budget spent)")
            continue
        level = _run_level(stage, load)
        if isinstance(level, RateLevel):  # parse_rate's: the rate levels
            rate_levels.append(level)
        else:
            levels.append(level)
        results.measured[-1] = results.measured[-1].model_copy(
            update={"levels": list(levels), "rate_levels": list(rate_levels)}
        )
        results.save()


def _run_level(stage: _StageRun, load: _Load) -> Level | RateLevel:
    """One aiperf run, its figures and its goodput (counted from its records)."""
    profile, workload = load.profile, load.workload(stage.cfg, stage.adjust)
    artifacts = stage.run_dir / load.name
    stage.progress(
        f"{profile.name} ({profile.input_tokens} in / {profile.output_tokens} out) "
        f"{load.shown}: {workload.request_count} requests ..."
    )
    aiperf.run(
        aiperf.command(
            stage.executable,
            url=stage.url,
            model=stage.cfg.serving.model.id,
            tokenizer=stage.tokenizer,
            workload=workload,
            artifact_dir=artifacts,
            goodput=stage.objectives.aiperf(),
        ),
        artifacts,
        env=stage.adjust.client_env,
    )
    level = (
        aiperf.parse(artifacts, load.streams)
        if load.rate is None
        else aiperf.parse_rate(artifacts, load.rate, workload.arrival)
    )
    counted = goodput.of_folder(artifacts, stage.objectives, closed_loop=load.rate is None)
    level = level.model_copy(update={"goodput": counted})
    stage.progress(_level_line(level))
    return level


def _level_line(level: Level | RateLevel) -> str:
    good = level.goodput
    return (
        f"  TTFT p50 {level.ttft_ms.p50:.1f} ms, ITL p50 {level.itl_ms.p50:.2f} ms, "
        f"E2E p50 {level.e2e_ms.p50:.0f} ms, {level.output_tokens_per_s:.0f} output tok/s, "
        f"{level.errors} errors"
        + (
            f"; goodput {good.per_s:.2f} requests/s ({good.good} of {good.requests} good{_interval(level)})"
            if good
            else ""
        )
    )


def _interval(level: Level | RateLevel) -> str:
    """The level's goodput interval and, near the TTFT objective, the unstable flag."""
    interval = goodput.interval_of(level.goodput)
    shown = "" if interval is None else f"; {interval.confidence:.0%} {interval.low:.2f}-{interval.high:.2f}"
    return shown + ("; UNSTABLE: TTFT p50 near the objective" if goodput.level_unstable(level) else "")
