"""A benchmark run as saved on disk: enough to compare two runs later without the stage file.

JSON, one file per run: what was measured (stage, mode, image, model, hardware, engine settings,
client and its version, time) and the measurements (per profile and concurrency level: percentiles of
time to first token, inter-token latency and end-to-end latency, throughput, and every request's
values for the distribution plots).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA = "pd-inference/bench-run/v1"


class ResultsError(Exception):
    """A results file that cannot be read: one line naming the file and the problem."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Stats(_Model):
    """Milliseconds (or the unit of the field that holds it)."""

    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> "Stats":
        if not values:
            raise ValueError("no values")
        ordered = sorted(values)
        return cls(mean=sum(ordered) / len(ordered), p50=percentile(ordered, 50), p90=percentile(ordered, 90),
                   p99=percentile(ordered, 99), min=ordered[0], max=ordered[-1])


def percentile(ordered: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on a sorted list."""
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Samples(_Model):
    """One value per successful request, in completion order (ms)."""

    ttft_ms: list[float]
    itl_ms: list[float]
    e2e_ms: list[float]


class Level(_Model):
    concurrency: int
    requests: int
    errors: int
    duration_s: float
    ttft_ms: Stats
    itl_ms: Stats
    e2e_ms: Stats
    output_tokens_per_s: float
    requests_per_s: float
    samples: Samples


class ProfileRun(_Model):
    name: str
    input_tokens: int
    output_tokens: int
    levels: list[Level]


class Hardware(_Model):
    instance_type: str
    gpu_nodes: int
    gpus_per_node: int
    gpu: str
    efa_interfaces: int
    availability_zone: str

    @property
    def title(self) -> str:
        efa = f"EFA x{self.efa_interfaces}" if self.efa_interfaces else "no EFA"
        return f"{self.gpu_nodes} x {self.instance_type} ({self.gpus_per_node} x {self.gpu}, {efa})"


class ClientOverhead(_Model):
    """What the client adds, measured against the local fake server (which records its own timings)."""

    concurrency: int
    server_max_inflight: int  # streams the fake server saw at once: the concurrency really reached
    requests: int
    injected_ttft_ms: float
    injected_itl_ms: float
    ttft_ms: Stats   # client TTFT - server TTFT, per request
    itl_ms: Stats    # client ITL - server ITL, per request
    e2e_ms: Stats    # client end-to-end - server end-to-end, per request


class Run(_Model):
    schema_: Literal["pd-inference/bench-run/v1"] = Field(SCHEMA, alias="schema")
    label: str
    note: str = ""   # shown in the report and the plots' titles (e.g. "fake server, not GPUs")
    created_at: str
    stage: str
    mode: str
    endpoint: str
    model_id: str
    model_source: str
    image: str
    hardware: Hardware
    settings: dict
    client: dict
    calibration: Optional[ClientOverhead] = None
    profiles: list[ProfileRun]

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.model_dump(by_alias=True), indent=1) + "\n")
        tmp.replace(path)  # never a half-written results file
        return path

    def profile(self, name: str) -> Optional[ProfileRun]:
        return next((profile for profile in self.profiles if profile.name == name), None)


def load(path: Path) -> Run:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such results file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsError(f"{path}: not a results JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ResultsError(f"{path}: schema: {found!r} is not a benchmark run (allowed: {SCHEMA!r})")
    try:
        return Run.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "(top)"
        raise ResultsError(f"{path}: {where}: {error['msg']}") from None


# Settings that differ between two commands measuring the same deployment: where the rehearsal's model
# folder and tokenizer were (a temporary path), what each command was told, what it skipped.
PER_COMMAND_SETTINGS = ("tokenizer", "rehearsal", "skipped", "merged_from")
SAME_DEPLOYMENT = ("label", "stage", "mode", "model_id", "model_source", "image", "hardware", "client")


def merge(runs: list[Run]) -> Run:
    """One run of the levels several commands measured on the same deployment (e.g. one command per
    profile where a command may last only minutes). They must agree on what was measured and how; a
    level measured twice is an error, not a choice."""
    if len(runs) < 2:
        raise ResultsError("give at least two runs")
    first = runs[0]
    for run in runs[1:]:
        for field in SAME_DEPLOYMENT:
            if getattr(run, field) != getattr(first, field):
                raise ResultsError(f"{field} differs between the run of {first.created_at} and the run of "
                                   f"{run.created_at}: {getattr(first, field)!r} vs {getattr(run, field)!r}")
        ours, theirs = ({k: v for k, v in r.settings.items() if k not in PER_COMMAND_SETTINGS} for r in (first, run))
        if ours != theirs:
            key = sorted(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))[0]
            raise ResultsError(f"settings.{key} differs between the run of {first.created_at} and the run "
                               f"of {run.created_at}: {ours.get(key)!r} vs {theirs.get(key)!r}")
    profiles: dict[str, ProfileRun] = {}
    for run in runs:
        for profile in run.profiles:
            known = profiles.get(profile.name)
            if known is None:
                profiles[profile.name] = profile
                continue
            if (known.input_tokens, known.output_tokens) != (profile.input_tokens, profile.output_tokens):
                raise ResultsError(f"profile {profile.name!r} has {known.input_tokens}/{known.output_tokens} "
                                   f"tokens in one run and {profile.input_tokens}/{profile.output_tokens} in another")
            twice = {level.concurrency for level in known.levels} & {level.concurrency for level in profile.levels}
            if twice:
                raise ResultsError(f"profile {profile.name!r} at concurrency {min(twice)} is in two runs "
                                   f"(keep one)")
            profiles[profile.name] = known.model_copy(update={"levels": sorted(
                [*known.levels, *profile.levels], key=lambda level: level.concurrency)})
    measured = {f"{name}-c{level.concurrency}" for name, profile in profiles.items() for level in profile.levels}
    skipped = sorted({s for run in runs for s in run.settings.get("skipped", [])} - measured)
    settings = {k: v for k, v in first.settings.items() if k != "skipped"}
    settings["merged_from"] = [run.created_at for run in runs]
    if skipped:
        settings["skipped"] = skipped
    calibration = next((run.calibration for run in runs if run.calibration is not None), None)
    return first.model_copy(update={"settings": settings, "calibration": calibration,
                                    "profiles": list(profiles.values())})
