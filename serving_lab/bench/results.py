"""A benchmark run as saved on disk: enough to compare two runs later without the stage file.

JSON, one file per run: what was measured (stage, mode, image, model, hardware, engine settings,
client and its version, time) and the measurements (per profile and concurrency level: percentiles of
time to first token, inter-token latency and end-to-end latency, throughput, and every request's
values for the distribution plots).
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clients.files import FileRefused, read_regular
from clients.kube import not_json_number

SCHEMA: Final = "pd-inference/bench-run/v1"


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
    def of(cls, values: list[float]) -> Stats:
        if not values:
            raise ValueError("no values")
        ordered = sorted(values)
        return cls(
            mean=sum(ordered) / len(ordered),
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            p99=percentile(ordered, 99),
            min=ordered[0],
            max=ordered[-1],
        )


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


class Goodput(_Model):
    """DistServe's goodput of one level, counted from aiperf's per-request records (serving_lab/bench/goodput.py):
    the measured requests (warm-up excluded) that succeeded with TTFT <= ttft_slo_ms and inter-token latency
    <= itl_slo_ms, per second of the level's duration (the first measured request's start to the last one's
    end)."""

    ttft_slo_ms: float
    itl_slo_ms: float
    good: int  # requests that met both objectives
    requests: int  # measured requests, failed ones included
    duration_s: float
    per_s: float  # good / duration_s
    # aiperf's own figure (its --goodput, given the same objectives): a cross-check; None when not asked for
    aiperf_per_s: float | None = None
    # per_s's percentile bootstrap interval over the measured requests (goodput.bootstrap); None: a run saved
    # before intervals
    low_per_s: float | None = None
    high_per_s: float | None = None
    confidence: float | None = None

    @property
    def attainment(self) -> float:
        """The share of measured requests that met both objectives (DistServe's SLO attainment)."""
        return self.good / self.requests if self.requests else 0.0


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
    goodput: Goodput | None = None  # None: a run saved before goodput, or its records were not kept

    @property
    def load(self) -> str:
        return f"concurrency {self.concurrency}"


class RateLevel(_Model):
    """One level of the open-loop sweep: requests sent at `request_rate` per second (Poisson arrivals), with
    no cap on how many are in flight; the same figures as a concurrency level."""

    request_rate: float
    arrival: str  # aiperf's --arrival-pattern
    max_inflight: int  # the most measured requests in flight at once, from the records
    requests: int
    errors: int
    duration_s: float
    ttft_ms: Stats
    itl_ms: Stats
    e2e_ms: Stats
    output_tokens_per_s: float
    requests_per_s: float
    samples: Samples
    goodput: Goodput | None = None

    @property
    def load(self) -> str:
        return f"{self.request_rate:g} requests/s"


class ProfileRun(_Model):
    name: str
    input_tokens: int
    output_tokens: int
    levels: list[Level]  # the concurrency sweep
    rate_levels: list[RateLevel] = Field(default_factory=list)  # the request-rate sweep

    def all_levels(self) -> list[Level | RateLevel]:
        """The concurrency levels, then the request-rate levels."""
        return [*self.levels, *self.rate_levels]


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
    ttft_ms: Stats  # client TTFT - server TTFT, per request
    itl_ms: Stats  # client ITL - server ITL, per request
    e2e_ms: Stats  # client end-to-end - server end-to-end, per request


class Run(_Model):
    schema_: Literal["pd-inference/bench-run/v1"] = Field(SCHEMA, alias="schema")
    label: str
    note: str = ""  # shown in the report and the plots' titles (e.g. "fake server, not GPUs")
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
    calibration: ClientOverhead | None = None
    profiles: list[ProfileRun]

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def save(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.model_dump(by_alias=True), indent=1) + "\n")
        tmp.replace(path)  # never a half-written results file
        return path

    def profile(self, name: str) -> ProfileRun | None:
        return next((profile for profile in self.profiles if profile.name == name), None)


# Limits on what `load` reads: a run is a few MB (every request's three values per level); a file much
# larger, or nested much deeper than a run is (about 6 levels; settings add a few), is not one.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
# Every number in a run (milliseconds, tokens/s, counts, settings) is far below this; the plots' arithmetic
# overflows on numbers near float's limit (1e308), and an integer has no limit at all.
MAX_NUMBER = 1e15
# A file name for the report's plots (report.py writes scaling-<profile>.png): the stage file's workload
# profile names are Kubernetes names; no separator, nothing a shell or Markdown reads.
PROFILE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
# The rehearsal override report.py reads back with ast.literal_eval (report._kv): a list of backend names.
KV_BACKENDS_OVERRIDE = ".kv_connector_extra_config.backends"


def load(path: Path) -> Run:
    """The run saved in `path`: only a regular file of at most MAX_BYTES (never a FIFO, a device or a
    socket, which could block or never end), UTF-8 JSON within MAX_DEPTH levels and with finite numbers,
    of the Run shape (strictly: "1.5" is not a number), with the values the report reads usable.
    Anything else is a ResultsError: one line naming the file and the problem."""
    path = Path(path)
    shown = _printable(str(path))
    data = _parse(shown, _read(path, shown))
    if not isinstance(data, dict):
        raise ResultsError(
            f"{shown}: (top): a JSON {_JSON_TYPES.get(type(data), '?')}, not a benchmark run (an object "
            f'with "schema": {SCHEMA!r})'
        )
    if data.get("schema") != SCHEMA:
        raise ResultsError(
            f"{shown}: schema: {_short(data.get('schema'))} is not a benchmark run (allowed: {SCHEMA!r})"
        )
    try:
        run = Run.model_validate(data, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ResultsError(f"{shown}: {_where(tuple(error['loc']))}: {error['msg']}") from None
    problem = _value_problem(run)
    if problem:
        raise ResultsError(f"{shown}: {problem}")
    return run


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "true or false", type(None): "null"}


def _read(path: Path, shown: str) -> bytes:
    try:
        return read_regular(path, MAX_BYTES)
    except FileRefused as exc:
        raise ResultsError(f"{shown}: {exc}: not a results file") from None


def _parse(shown: str, raw: bytes):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ResultsError(
            f"{shown}: not a results JSON file (not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        data = json.loads(text, parse_constant=not_json_number)
    except RecursionError:  # json's parser recurses per level: far deeper than MAX_DEPTH
        raise ResultsError(f"{shown}: not a results JSON file (nested more than {MAX_DEPTH} levels deep)") from None
    except ValueError as exc:  # json.JSONDecodeError, NaN/Infinity, an integer of more than 4300 digits
        raise ResultsError(f"{shown}: not a results JSON file ({_printable(str(exc))[:200]})") from None
    problem = _structure_problem(data)
    if problem:
        raise ResultsError(f"{shown}: {problem}")
    return data


def _structure_problem(data) -> str:
    """The first container nested deeper than MAX_DEPTH or number beyond MAX_NUMBER (1e999 reads as
    infinity), walked iteratively: no recursion on hostile input; "" when none."""
    stack: list[tuple[dict | list, int, tuple]] = [(data, 1, ())] if isinstance(data, (dict, list)) else []
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return f"{_where(where)}: nested more than {MAX_DEPTH} levels deep: not a results file"
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (*where, key)))
            elif isinstance(item, (int, float)) and not isinstance(item, bool) and not abs(item) <= MAX_NUMBER:
                return (
                    f"{_where((*where, key))}: the number {_short(item)} is out of range (allowed: at most "
                    f"{MAX_NUMBER:.0e} either side of 0)"
                )
    return ""


def _where(path: tuple) -> str:
    return _printable(".".join(str(part) for part in path)[:200]) or "(top)"


def _value_problem(run: Run) -> str:
    """What the report and merge would fail on although the types are right; "" when none."""
    problems = (_profile_problem(f"profiles.{i}", profile) for i, profile in enumerate(run.profiles))
    problem = _plotted_problem(run) or next((found for found in problems if found), "")
    if problem:
        return problem
    for where, value in _counts(run):
        if value < 0:
            return f"{where}: {value} (allowed: 0 or more)"
    return _settings_problem(run.settings)


def _plotted_problem(run: Run) -> str:
    """The plots' titles and legends: matplotlib reads text between two '$' as TeX math, and fails on most."""
    plotted = [
        ("label", run.label),
        ("note", run.note),
        ("model_id", run.model_id),
        ("hardware.instance_type", run.hardware.instance_type),
        ("hardware.gpu", run.hardware.gpu),
    ]
    for where, text in plotted:
        if "$" in text:
            return f"{where}: {_short(text)} has a '$' (the report's plots would read it as TeX math)"
    return ""


def _profile_problem(where: str, profile: ProfileRun) -> str:
    """A profile's name (it names plot files), its levels' concurrency and request rate, their goodput."""
    if not PROFILE_NAME.match(profile.name):
        return (
            f"{where}.name: {_short(profile.name)} is not a profile name (letters, digits, '.', '_', '-'; "
            f"it names the report's plot files)"
        )
    for j, level in enumerate(profile.levels):
        if level.concurrency < 1:  # the plots' concurrency axis is logarithmic
            return f"{where}.levels.{j}.concurrency: {level.concurrency} (allowed: 1 or more)"
    for j, rate in enumerate(profile.rate_levels):
        if not rate.request_rate > 0:
            return f"{where}.rate_levels.{j}.request_rate: {rate.request_rate:g} (allowed: more than 0)"
    goodputs = [("levels", j, level.goodput) for j, level in enumerate(profile.levels)]
    goodputs += [("rate_levels", j, rate.goodput) for j, rate in enumerate(profile.rate_levels)]
    for kind, j, goodput in goodputs:
        problem = _goodput_problem(goodput)
        if problem:
            return f"{where}.{kind}.{j}.goodput.{problem}"
    return ""


def _counts(run: Run) -> list[tuple[str, int]]:
    """Every count of the run (nodes, GPUs, tokens, requests, errors) with where it is: none may be below 0."""
    counts = [
        ("hardware.gpu_nodes", run.hardware.gpu_nodes),
        ("hardware.gpus_per_node", run.hardware.gpus_per_node),
        ("hardware.efa_interfaces", run.hardware.efa_interfaces),
    ]
    if run.calibration is not None:
        counts += [
            (f"calibration.{name}", getattr(run.calibration, name))
            for name in ("concurrency", "server_max_inflight", "requests")
        ]
    for i, profile in enumerate(run.profiles):
        where = f"profiles.{i}"
        counts += [(f"{where}.input_tokens", profile.input_tokens), (f"{where}.output_tokens", profile.output_tokens)]
        for j, level in enumerate(profile.levels):
            counts += [(f"{where}.levels.{j}.requests", level.requests), (f"{where}.levels.{j}.errors", level.errors)]
        for j, rate in enumerate(profile.rate_levels):
            counts += [
                (f"{where}.rate_levels.{j}.{name}", getattr(rate, name))
                for name in ("requests", "errors", "max_inflight")
            ]
    return counts


def _goodput_problem(goodput: Goodput | None) -> str:
    """A goodput the report would rank wrongly although the types are right; "" when none."""
    if goodput is None:
        return ""
    for name in ("ttft_slo_ms", "itl_slo_ms"):
        if not getattr(goodput, name) > 0:
            return f"{name}: {getattr(goodput, name):g} (allowed: more than 0)"
    for name in ("good", "requests", "duration_s", "per_s"):
        if getattr(goodput, name) < 0:
            return f"{name}: {getattr(goodput, name):g} (allowed: 0 or more)"
    if goodput.good > goodput.requests:
        return f"good: {goodput.good} is more than the {goodput.requests} requests measured"
    return _interval_problem(goodput)


def _interval_problem(goodput: Goodput) -> str:
    """An interval is all three fields or none, and holds its own figure."""
    bounds = (goodput.low_per_s, goodput.high_per_s, goodput.confidence)
    if all(value is None for value in bounds):
        return ""
    if any(value is None for value in bounds):
        return "low_per_s, high_per_s, confidence: all three or none"
    assert goodput.low_per_s is not None and goodput.high_per_s is not None and goodput.confidence is not None
    if not 0 < goodput.confidence < 1:
        return f"confidence: {goodput.confidence:g} (allowed: between 0 and 1)"
    if not 0 <= goodput.low_per_s <= goodput.per_s <= goodput.high_per_s:
        return (
            f"low_per_s, high_per_s: {goodput.low_per_s:g}-{goodput.high_per_s:g} does not hold per_s "
            f"{goodput.per_s:g} (allowed: 0 <= low <= per_s <= high)"
        )
    return ""


def _settings_problem(settings: dict) -> str:
    """settings is free-form, but merge and the report read a few of its keys."""
    for key in ("engine", "rehearsal"):
        if key in settings and not isinstance(settings[key], dict):
            return f"settings.{key}: {_short(settings[key])} (allowed: an object)"
    skipped = settings.get("skipped", [])
    if not isinstance(skipped, list) or not all(isinstance(item, str) for item in skipped):
        return f"settings.skipped: {_short(skipped)} (allowed: a list of strings)"
    overrides = settings.get("rehearsal", {}).get("overrides", [])
    if not isinstance(overrides, list) or not all(isinstance(line, str) for line in overrides):
        return f"settings.rehearsal.overrides: {_short(overrides)} (allowed: a list of strings)"
    for k, line in enumerate(overrides):
        path, _, change = line.removeprefix("override ").partition(": ")
        if path.endswith(KV_BACKENDS_OVERRIDE) and " -> " in change:
            new = change.split(" -> ", 1)[1].split(" (", 1)[0]
            try:
                value = ast.literal_eval(new) if len(new) <= 1000 else None
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = None
            if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
                return (
                    f"settings.rehearsal.overrides.{k}: the new value of {_short(path)} is not a list of backend "
                    f"names ({_short(new)})"
                )
    return ""


def _printable(text: str) -> str:
    """Control characters (a newline in a file name, a terminal escape) as escapes: a message stays one line."""
    return "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode("ascii") for ch in text
    )


def _short(value, limit: int = 60) -> str:
    if isinstance(value, str):
        return _printable(repr(value[:limit]) + ("..." if len(value) > limit else ""))
    if isinstance(value, dict):
        return f"<an object of {len(value)} keys>"
    if isinstance(value, list):
        return f"<a list of {len(value)} items>"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "<an integer of more than 19 digits>"
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value)


def level_name(profile: str, level: Level | RateLevel) -> str:
    """The folder of a level's aiperf artifacts beside the run's JSON, and its name in settings.skipped:
    `chat-c16` (concurrency 16), `chat-r0.5` (0.5 requests/s)."""
    if isinstance(level, RateLevel):
        return f"{profile}-r{level.request_rate:g}"
    return f"{profile}-c{level.concurrency}"


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
        _check_same_deployment(first, run)
    profiles: dict[str, ProfileRun] = {}
    for run in runs:
        for profile in run.profiles:
            known = profiles.get(profile.name)
            profiles[profile.name] = profile if known is None else _merged_profile(known, profile)
    measured = {level_name(name, level) for name, profile in profiles.items() for level in profile.all_levels()}
    skipped = sorted({s for run in runs for s in run.settings.get("skipped", [])} - measured)
    settings = {k: v for k, v in first.settings.items() if k != "skipped"}
    settings["merged_from"] = [run.created_at for run in runs]
    if skipped:
        settings["skipped"] = skipped
    calibration = next((run.calibration for run in runs if run.calibration is not None), None)
    return first.model_copy(
        update={"settings": settings, "calibration": calibration, "profiles": list(profiles.values())}
    )


def _check_same_deployment(first: Run, run: Run) -> None:
    """`run` measured what `first` did, the same way: SAME_DEPLOYMENT and the settings not PER_COMMAND."""
    for field in SAME_DEPLOYMENT:
        if getattr(run, field) != getattr(first, field):
            raise ResultsError(
                f"{field} differs between the run of {first.created_at} and the run of "
                f"{run.created_at}: {getattr(first, field)!r} vs {getattr(run, field)!r}"
            )
    ours, theirs = ({k: v for k, v in r.settings.items() if k not in PER_COMMAND_SETTINGS} for r in (first, run))
    if ours != theirs:
        key = min(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
        raise ResultsError(
            f"settings.{key} differs between the run of {first.created_at} and the run "
            f"of {run.created_at}: {ours.get(key)!r} vs {theirs.get(key)!r}"
        )


def _merged_profile(known: ProfileRun, profile: ProfileRun) -> ProfileRun:
    """Two runs' levels of one profile, in order; the same lengths, and no level measured twice."""
    if (known.input_tokens, known.output_tokens) != (profile.input_tokens, profile.output_tokens):
        raise ResultsError(
            f"profile {profile.name!r} has {known.input_tokens}/{known.output_tokens} "
            f"tokens in one run and {profile.input_tokens}/{profile.output_tokens} in another"
        )
    twice = {level.concurrency for level in known.levels} & {level.concurrency for level in profile.levels}
    if twice:
        raise ResultsError(f"profile {profile.name!r} at concurrency {min(twice)} is in two runs (keep one)")
    rates = {level.request_rate for level in known.rate_levels} & {lv.request_rate for lv in profile.rate_levels}
    if rates:
        raise ResultsError(f"profile {profile.name!r} at {min(rates):g} requests/s is in two runs (keep one)")
    return known.model_copy(
        update={
            "levels": sorted([*known.levels, *profile.levels], key=lambda level: level.concurrency),
            "rate_levels": sorted([*known.rate_levels, *profile.rate_levels], key=lambda level: level.request_rate),
        }
    )
