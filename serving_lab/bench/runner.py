"""One benchmark run of a stage: every profile of its `benchmark` section (or the ones asked for), at
each concurrency level, through aiperf, saved as one results JSON beside aiperf's own artifacts."""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from config.instance_types import INSTANCE_TYPES
from config.schema import StageConfig, WorkloadProfile

from . import aiperf, calibration
from .results import Hardware, Level, ProfileRun, Run


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


def settings(cfg: StageConfig, tokenizer: str) -> dict:
    serving = cfg.serving
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
    """What `ops rehearse` changes about a stage run, recorded in the results' settings: the host's
    hardware instead of the stage's nodes, a subset of the levels, fewer requests per stream, the
    engine overrides, a deadline after which no new level starts (the run so far is kept), and a time
    bound per level (requests in flight when it ends may finish within their timeout and are counted)."""

    hardware: Hardware | None = None
    levels: Sequence[int] | None = None
    requests_per_stream: int | None = None
    deadline: float | None = None  # time.monotonic() value
    level_seconds: float | None = None  # each level stops sending after this long (aiperf --benchmark-duration)
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
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> tuple[Run, Path]:
    profiles = select(cfg, profile_names)
    if adjust.levels is not None or adjust.requests_per_stream is not None:
        profiles = [
            profile.model_copy(
                update={
                    "concurrency": [c for c in profile.concurrency if adjust.levels is None or c in adjust.levels],
                    **({"requests_per_stream": adjust.requests_per_stream} if adjust.requests_per_stream else {}),
                }
            )
            for profile in profiles
        ]
        profiles = [profile for profile in profiles if profile.concurrency]
        if not profiles:
            raise aiperf.BenchError(f"no profile of stage {cfg.stage} has any of the levels {list(adjust.levels)}")
    tokenizer = tokenizer or cfg.benchmark.tokenizer or cfg.serving.model.source
    started = now()
    label = label or cfg.serving.mode
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    run_dir = Path(out_dir) / cfg.stage / f"{stamp}-{label}"
    overhead = None
    if calibrate:
        top = max(max(profile.concurrency) for profile in profiles)
        progress(f"calibration: aiperf against the local fake server at concurrency {top} ...")
        overhead, _ = calibration.measure(
            executable, run_dir / "calibration", concurrency=top, client_env=adjust.client_env
        )
        progress(
            f"calibration: client overhead per request at {top} streams: TTFT +{overhead.ttft_ms.p50:.1f} ms, "
            f"ITL +{overhead.itl_ms.p50:.2f} ms, end-to-end +{overhead.e2e_ms.p50:.1f} ms (medians)"
        )
    measured: list[ProfileRun] = []
    skipped: list[str] = []

    def result() -> Run:
        return Run(
            label=label,
            note=note,
            created_at=started.isoformat(timespec="seconds"),
            stage=cfg.stage,
            mode=cfg.serving.mode,
            endpoint=endpoint_label or url,
            model_id=cfg.serving.model.id,
            model_source=cfg.serving.model.source,
            image=cfg.image,
            hardware=adjust.hardware or hardware(cfg),
            settings={**settings(cfg, tokenizer), **adjust.recorded, **({"skipped": skipped} if skipped else {})},
            client={"name": "aiperf", "version": version, "endpoint_type": "chat", "streaming": True},
            calibration=overhead,
            profiles=[profile for profile in measured if profile.levels],
        )

    version = aiperf.version(executable, env=adjust.client_env)
    path = run_dir.with_suffix(".json")
    for profile in profiles:
        levels: list[Level] = []
        measured.append(
            ProfileRun(
                name=profile.name, input_tokens=profile.input_tokens, output_tokens=profile.output_tokens, levels=levels
            )
        )
        for concurrency in profile.concurrency:
            if adjust.deadline is not None and time.monotonic() >= adjust.deadline:
                skipped.append(f"{profile.name}-c{concurrency}")
                progress(f"{profile.name} concurrency {concurrency}: skipped (time budget spent)")
                continue
            workload = aiperf.Workload(
                input_tokens=profile.input_tokens,
                output_tokens=profile.output_tokens,
                concurrency=concurrency,
                request_count=profile.request_count(concurrency),
                warmup_requests=concurrency,
                random_seed=cfg.benchmark.random_seed,
                request_timeout_seconds=cfg.benchmark.request_timeout_seconds,
                duration_seconds=adjust.level_seconds,
            )
            artifacts = run_dir / f"{profile.name}-c{concurrency}"
            progress(
                f"{profile.name} ({profile.input_tokens} in / {profile.output_tokens} out) "
                f"concurrency {concurrency}: {workload.request_count} requests ..."
            )
            aiperf.run(
                aiperf.command(
                    executable,
                    url=url,
                    model=cfg.serving.model.id,
                    tokenizer=tokenizer,
                    workload=workload,
                    artifact_dir=artifacts,
                ),
                artifacts,
                env=adjust.client_env,
            )
            level = aiperf.parse(artifacts, concurrency)
            progress(
                f"  TTFT p50 {level.ttft_ms.p50:.1f} ms, ITL p50 {level.itl_ms.p50:.2f} ms, "
                f"E2E p50 {level.e2e_ms.p50:.0f} ms, {level.output_tokens_per_s:.0f} output tok/s, "
                f"{level.errors} errors"
            )
            levels.append(level)
            measured[-1] = measured[-1].model_copy(update={"levels": list(levels)})
            result().save(path)  # after every level: an interrupted run keeps what it measured
    return result(), result().save(path)
