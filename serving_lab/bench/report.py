"""Two benchmark runs side by side: a Markdown report (medians, p90 and p99 per profile and
concurrency, and where each run is ahead; with goodput, the runs ranked by it per profile and each
level's goodput; the request-rate sweep's levels) and PNG plots (TTFT and ITL distributions; throughput
and latency against concurrency), the stage's hardware in every title.

Goodput ranking (`ranking`): per profile, each run's best goodput, the highest over the levels both runs
measured (the concurrency and the request-rate sweep together; goodput.best). Runs are ordered by it,
highest first; a run within TIE (5 %) of the best of a rank shares that rank ("tie"); a run whose best is
0 (no request met both objectives at any level) is not ranked ("-"), nor is one without a goodput under
the report's objectives (a run saved before goodput, whose records are gone: "n/a")."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from clients.text import shown

from . import goodput as goodput_
from .results import Level, RateLevel, ResultsError, Run

COLORS = ("#1f77b4", "#d62728")
# Every string a results file carries goes through md() (or code() inside a code span) before it enters the
# Markdown: a results file is data from wherever it was made, and viewers render raw HTML and links.
# Why: docs/DECISIONS.md, "Results files escaped before they become Markdown".
_MARKDOWN_ESCAPES = str.maketrans(
    {
        "&": "&amp;",  # no entity of the file's own
        "<": "&lt;",  # no raw HTML (<script>, <img onerror=...>) and no <autolink>
        ">": "&gt;",
        **{c: "\\" + c for c in "\\`*_[]|~"},  # no code span, emphasis, [link](javascript:...) or cell break
    }
)


def md(value: object) -> str:
    """A value from a results file as plain Markdown text, safe in a table cell: one line, no markup."""
    return _one_line(str(value)).translate(_MARKDOWN_ESCAPES)


def code(value: object) -> str:
    """A value from a results file inside a code span: backticks cannot close it (they become '), `|` cannot
    end the table cell; nothing else is read as markup inside a code span (CommonMark 6.1)."""
    return "`" + _one_line(str(value)).replace("`", "'").replace("|", "\\|") + "`"


# The one bound on a string of a results file wherever the report or a plot shows it: a 2 MB label made
# matplotlib lay out every title and legend in full (minutes per --compare); an image with its digest fits.
SHOWN_CHARS = 160


def _one_line(text: str) -> str:
    """One line of at most SHOWN_CHARS, every control character escaped (clients/text.py shown, the one
    sanitizer): a newline would end the table row, or start an HTML block or a heading of the file's own."""
    return shown(text, SHOWN_CHARS)


def _plain(value: object) -> str:
    """A value from a results file in a plot title or legend: matplotlib reads `$...$` as mathtext (and an
    unbalanced `$` fails the figure), matplotlib.org text/mathtext.html."""
    return _one_line(str(value)).replace("$", "\\$")


# A difference smaller than this is reported as a tie: shared machines and networks are noisy.
TIE = 0.05


@dataclass(frozen=True)
class Metric:
    label: str
    get: Callable[[Level | RateLevel], float | None]  # None: not measured at that level (goodput)
    lower_is_better: bool = True
    unit: str = "ms"


METRICS = (
    Metric("TTFT p50", lambda lv: lv.ttft_ms.p50),
    Metric("TTFT p99", lambda lv: lv.ttft_ms.p99),
    Metric("ITL p50", lambda lv: lv.itl_ms.p50),
    Metric("ITL p99", lambda lv: lv.itl_ms.p99),
    Metric("E2E p50", lambda lv: lv.e2e_ms.p50),
    Metric("E2E p99", lambda lv: lv.e2e_ms.p99),
    Metric("output throughput", lambda lv: lv.output_tokens_per_s, lower_is_better=False, unit="tok/s"),
)


# Per profile both runs measured: its name and the (run A, run B) levels at each common concurrency.
Shared = list[tuple[str, list[tuple[Level, Level]]]]
# Per profile: the (run A, run B) levels at each request rate both measured.
SharedRates = dict[str, list[tuple[RateLevel, RateLevel]]]


def _same_profiles(a: Run, b: Run):
    for profile_a in a.profiles:
        profile_b = b.profile(profile_a.name)
        if profile_b is None:
            continue
        if (profile_a.input_tokens, profile_a.output_tokens) != (profile_b.input_tokens, profile_b.output_tokens):
            continue
        yield profile_a, profile_b


def shared_levels(a: Run, b: Run) -> Shared:
    """Profiles both runs measured, each with the concurrency levels both measured (none: a profile whose
    shared levels are request rates only)."""
    shared = []
    for profile_a, profile_b in _same_profiles(a, b):
        levels_b = {level.concurrency: level for level in profile_b.levels}
        pairs = [(level, levels_b[level.concurrency]) for level in profile_a.levels if level.concurrency in levels_b]
        if pairs or _rate_pairs(profile_a, profile_b):
            shared.append((profile_a.name, pairs))
    if not shared:
        raise ResultsError(
            f"runs {_one_line(repr(a.label))} and {_one_line(repr(b.label))} share no profile (same name, prompt and answer "
            f"lengths) at a common concurrency or request rate: nothing to compare"
        )
    return shared


def _rate_pairs(profile_a, profile_b) -> list[tuple[RateLevel, RateLevel]]:
    rates_b = {level.request_rate: level for level in profile_b.rate_levels}
    return [(level, rates_b[level.request_rate]) for level in profile_a.rate_levels if level.request_rate in rates_b]


def shared_rates(a: Run, b: Run) -> SharedRates:
    """Per profile both runs measured, the request-rate levels both measured (profiles without any left out)."""
    found = {}
    for profile_a, profile_b in _same_profiles(a, b):
        pairs = _rate_pairs(profile_a, profile_b)
        if pairs:
            found[profile_a.name] = pairs
    return found


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def _levels(values: list) -> str:
    return ", ".join(str(v) for v in values)


GOODPUT = Metric("goodput", lambda lv: lv.goodput.per_s if lv.goodput else None, lower_is_better=False, unit="/s")


def _at(levels: list) -> str:
    """Where a run is ahead: `concurrency 1, 16` or `0.5, 2 requests/s`."""
    if levels and isinstance(levels[0], RateLevel):
        return f"{', '.join(f'{level.request_rate:g}' for level in levels)} requests/s"
    return f"concurrency {_levels([level.concurrency for level in levels])}"


def verdicts(a: Run, b: Run, pairs: list[tuple], with_goodput: bool = False) -> list[str]:
    """Per metric: at which levels (concurrency, or request rate) each run is ahead by more than TIE, in
    words. Goodput (when asked): a level where only one run met the objectives at all puts it ahead; where
    neither did, a tie."""
    return [_verdict(a, b, metric, pairs) for metric in ((*METRICS, GOODPUT) if with_goodput else METRICS)]


def _verdict(a: Run, b: Run, metric: Metric, pairs: list[tuple]) -> str:
    """One metric's line, over the levels where both runs have it."""
    counted = []
    for level_a, level_b in pairs:
        va, vb = metric.get(level_a), metric.get(level_b)
        if va is not None and vb is not None:
            counted.append((level_a, level_b, va, vb))
    if not counted:
        return f"- {metric.label}: n/a at every level"
    ahead_a, ahead_b, ratios = _ahead(metric, counted)
    parts = []
    if ahead_a:
        parts.append(f"**{md(a.label)}** ahead at {_at(ahead_a)}")
    if ahead_b:
        parts.append(f"**{md(b.label)}** ahead at {_at(ahead_b)}")
    if not parts:
        parts.append(f"within {TIE:.0%} at every level")
    span = f" ({md(a.label)}/{md(b.label)} = {min(ratios):.2f}-{max(ratios):.2f})" if ratios else ""
    return f"- {metric.label}: " + "; ".join(parts) + span


def _ahead(metric: Metric, counted: list[tuple]) -> tuple[list, list, list[float]]:
    """The levels where run A is ahead by more than TIE, those where run B is, and the A/B ratios (a level
    where B's value is 0 has none: goodput's A is ahead there when it is above 0). Goodput with both
    intervals: ahead only where the intervals do not overlap, and no ratio (the goodput table states it
    with both intervals)."""
    ahead_a: list[Level | RateLevel] = []
    ahead_b: list[Level | RateLevel] = []
    ratios: list[float] = []
    for level_a, level_b, va, vb in counted:
        apart = _intervals_apart(level_a, level_b) if metric is GOODPUT else None
        if apart is not None:
            (ahead_a if apart == "a" else ahead_b if apart == "b" else []).append(level_a)
            continue
        if vb == 0:
            if metric is GOODPUT and va > 0:
                ahead_a.append(level_a)
            continue
        ratio = va / vb
        ratios.append(ratio)
        better_a = ratio < 1 - TIE if metric.lower_is_better else ratio > 1 + TIE
        better_b = ratio > 1 + TIE if metric.lower_is_better else ratio < 1 - TIE
        (ahead_a if better_a else ahead_b if better_b else []).append(level_a)
    return ahead_a, ahead_b, ratios


def _intervals_apart(level_a: Level | RateLevel, level_b: Level | RateLevel) -> str | None:
    """ "a" or "b" where one level's goodput interval lies wholly above the other's, "" where they overlap;
    None where either level has no interval (the TIE rule applies)."""
    a, b = goodput_.interval_of(level_a.goodput), goodput_.interval_of(level_b.goodput)
    if a is None or b is None:
        return None
    return "a" if a.low > b.high else "b" if b.low > a.high else ""


def _overhead(run: Run) -> str:
    cal = run.calibration
    if cal is None:
        return "not measured"
    return (
        f"TTFT +{cal.ttft_ms.p50:.1f} ms, ITL +{cal.itl_ms.p50:.2f} ms, end-to-end +{cal.e2e_ms.p50:.1f} ms "
        f"(medians at {cal.concurrency} streams)"
    )


def _objectives(a: Run, b: Run) -> goodput_.Objectives | None:
    """The objectives of the report's goodput: those run A recorded (settings.slo), else run B's, else
    those of the first goodput either has; None when neither run has a goodput."""
    for run in (a, b):
        found = goodput_.Objectives.of_settings(run.settings)
        if found is not None and _has_goodput(run, found):
            return found
    for run in (a, b):
        for profile in run.profiles:
            for level in profile.all_levels():
                if level.goodput is not None:
                    return goodput_.Objectives(level.goodput.ttft_slo_ms, level.goodput.itl_slo_ms)
    return None


def _has_goodput(run: Run, objectives: goodput_.Objectives) -> bool:
    return any(
        level.goodput is not None and objectives.of(level.goodput)
        for profile in run.profiles
        for level in profile.all_levels()
    )


def under(run: Run, objectives: goodput_.Objectives) -> Run:
    """`run` with only the goodput counted under `objectives` (any other: None, shown as n/a)."""
    profiles = [
        profile.model_copy(
            update={
                kind: [
                    level
                    if level.goodput is None or objectives.of(level.goodput)
                    else level.model_copy(update={"goodput": None})
                    for level in getattr(profile, kind)
                ]
                for kind in ("levels", "rate_levels")
            }
        )
        for profile in run.profiles
    ]
    return run.model_copy(update={"profiles": profiles})


def ranking(values: list[tuple]) -> list[tuple]:
    """(key, best goodput or None) -> (rank, key, value), best first (stable among equals); see the
    module's docstring."""
    ordered = sorted(values, key=lambda item: (item[1] is None, -(item[1] or 0.0)))
    ranked, rank, leader = [], 0, None
    for position, (label, value) in enumerate(ordered, start=1):
        if value is None:
            ranked.append(("n/a", label, value))
        elif value <= 0:
            ranked.append(("-", label, value))
        else:
            if leader is None or value < leader * (1 - TIE):
                rank, leader = position, value
            ranked.append((str(rank), label, value))
    ties = {r for r, *_ in ranked if r.isdigit() and sum(1 for q, *_ in ranked if q == r) > 1}
    return [(f"{r} (tie)" if r in ties else r, label, value) for r, label, value in ranked]


def _good(level: Level | RateLevel) -> str:
    """The level's goodput cell: good/measured, its interval when recorded, and the unstable flag."""
    g = level.goodput
    if g is None:
        return "-"
    interval = goodput_.interval_of(g)
    shown = f"; {interval.confidence:.0%} {interval.low:.2f}-{interval.high:.2f}" if interval else ""
    flag = " **unstable**" if goodput_.level_unstable(level) else ""
    return f"{g.per_s:.2f} ({g.good}/{g.requests}{shown}){flag}"


def goodput_section(profiles: list[tuple[str, list[tuple[str, list]]]], objectives: goodput_.Objectives) -> list[str]:
    """The ranking table: per profile, each run's best goodput and where it reached it.
    `profiles`: (profile name, [(run label, the run's levels that count) for each run that has it])."""
    # objectives.title is numbers formatted by goodput.Objectives.title (no text of a file): not escaped
    out = [
        "## Goodput",
        "",
        (
            f"Goodput: requests per second that met both objectives ({objectives.title}), counted from aiperf's "
            "per-request records (docs/BENCHMARK.md). Per profile, each run's best level over the levels "
            f"compared (concurrency and request rate); runs within {TIE:.0%} of each other share a rank, a run "
            "that met the objectives at no level is not ranked (-), one without a goodput under these "
            "objectives is n/a."
        ),
        "",
        "| profile | rank | run | best goodput (requests/s) | at | good / measured | attainment |",
        "|---|---|---|---:|---|---:|---:|",
    ]
    for name, per_run in profiles:
        bests = [goodput_.best(levels, objectives) for _, levels in per_run]
        values = [(i, best.goodput.per_s if best and best.goodput else None) for i, best in enumerate(bests)]
        for rank, i, value in ranking(values):
            label, level = per_run[i][0], bests[i]
            if level is None:
                out.append(f"| {md(name)} | {md(rank)} | {md(label)} | n/a | | | |")
                continue
            g = level.goodput
            out.append(
                f"| {md(name)} | {md(rank)} | {md(label)} | {value:.2f} | {md(level.load)} | {g.good} / {g.requests} | "
                f"{g.attainment:.0%} |"
            )
    return out + [""]


def markdown(
    a: Run,
    b: Run,
    shared: Shared,
    images: dict[str, list[str]],
    rates: SharedRates | None = None,
    objectives: goodput_.Objectives | None = None,
) -> str:
    """`objectives`: goodput's, every goodput of the runs counted under them (compare: `under`); None, or
    no goodput in either run: no goodput section or columns."""
    rates = rates or {}
    with_goodput = objectives is not None and (_has_goodput(a, objectives) or _has_goodput(b, objectives))
    out = _heading(a, b) + _setup_table(a, b)
    if with_goodput and objectives is not None:  # with_goodput implies objectives
        out += [""] + _goodput_ranking(a, b, shared, rates, objectives)
    for name, pairs in shared:
        out += _profile_section(_Compared(a, b, with_goodput), name, pairs, images.get(name, []), rates.get(name))
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class _Compared:
    """The two runs of a report, and whether its tables show goodput."""

    a: Run
    b: Run
    with_goodput: bool


def _heading(a: Run, b: Run) -> list[str]:
    """The title, the runs' notes, and a warning when their hardware differs."""
    out = [f"# Benchmark: {md(a.label)} vs {md(b.label)}", ""]
    for note in dict.fromkeys(n for n in (a.note, b.note) if n):
        out += [f"> **{md(note)}**", ""]
    if a.hardware != b.hardware:
        out += ["> Warning: the two runs used different hardware; differences below are not only the mode.", ""]
    return out


def _setup_table(a: Run, b: Run) -> list[str]:
    """What each run measured on what: hardware, model, image, engine, client, endpoint, time."""
    rows = [
        ("run", md(a.label), md(b.label)),
        ("mode", md(a.mode), md(b.mode)),
        ("stage", md(a.stage), md(b.stage)),
        ("hardware", md(a.hardware.title), md(b.hardware.title)),
        ("GPU availability zone", md(a.hardware.availability_zone), md(b.hardware.availability_zone)),
        ("model", f"{md(a.model_id)} ({md(a.model_source)})", f"{md(b.model_id)} ({md(b.model_source)})"),
        ("image", _image(a), _image(b)),
        ("engine", _engine(a), _engine(b)),
        ("KV transfer", _kv(a), _kv(b)),
        ("client", _client(a), _client(b)),
        ("client overhead per request", _overhead(a), _overhead(b)),
        ("endpoint", md(a.endpoint), md(b.endpoint)),
        ("measured at", md(a.created_at), md(b.created_at)),
    ]
    return [
        (
            f"Hardware: {md(a.hardware.title)}; model {md(a.model_id)}. Latencies in ms, throughput in output tokens/s. "
            f'Percentiles and throughput are aiperf\'s own figures. "Ahead" means better by more than '
            f"{TIE:.0%}."
        ),
        "",
        f"| | {md(a.label)} | {md(b.label)} |",
        "|---|---|---|",
        *(f"| {name} | {va} | {vb} |" for name, va, vb in rows),  # each cell escaped where it is made
    ]


def _goodput_ranking(a: Run, b: Run, shared: Shared, rates: SharedRates, objectives: goodput_.Objectives) -> list[str]:
    """goodput_section over the levels compared: per profile, each run's shared concurrency and rate levels."""
    compared = [
        (
            name,
            [
                (run.label, [*(pair[i] for pair in pairs), *(pair[i] for pair in rates.get(name, []))])
                for i, run in enumerate((a, b))
            ],
        )
        for name, pairs in shared
    ]
    return goodput_section(compared, objectives)[:-1]


def _goodput_ratios(a: Run, b: Run, pairs: list[tuple]) -> list[str]:
    """Per level both runs measured: A's goodput over B's, stated only with both intervals (goodput.ratio)."""
    out = []
    for level_a, level_b in pairs:
        stated = goodput_.ratio(goodput_.interval_of(level_a.goodput), goodput_.interval_of(level_b.goodput))
        flags = [md(run.label) for run, level in ((a, level_a), (b, level_b)) if goodput_.level_unstable(level)]
        unstable = f"; unstable: {', '.join(flags)} (TTFT p50 near the objective)" if flags else ""
        out.append(
            f"- goodput {md(a.label)}/{md(b.label)} at {md(level_a.load)}: "
            + (stated or "not stated (a level without an interval, or B at 0)")
            + unstable
        )
    return out


def _profile_section(
    compared: _Compared,
    name: str,
    pairs: list[tuple[Level, Level]],
    images: list[str],
    rate_pairs: list[tuple[RateLevel, RateLevel]] | None,
) -> list[str]:
    """One profile: where each run is ahead, its plots, its concurrency table and its request-rate sweep."""
    a, b, with_goodput = compared.a, compared.b, compared.with_goodput
    profile = a.profile(name)
    assert profile is not None  # shared names profiles of both runs
    out = ["", f"## {md(name)}: {profile.input_tokens} tokens in, {profile.output_tokens} out", ""]
    if pairs:
        out += verdicts(a, b, pairs, with_goodput) + [""]
    if with_goodput:
        out += _goodput_ratios(a, b, [*pairs, *(rate_pairs or [])]) + [""]
    # the plot files are named from profile names, which results.PROFILE_NAME keeps to [A-Za-z0-9._-]
    out += [f"![{md(image)}]({image})" for image in images] + [""]
    if pairs:
        out += _concurrency_table(a, b, pairs, with_goodput)
    if rate_pairs is not None:
        out += ([""] if pairs else []) + _rate_table(a, b, rate_pairs, with_goodput)
    return out


# The figures both sweeps' tables show for a level, after the columns that say which level it is.
_FIGURE_HEADS = (
    "TTFT p50 | TTFT p90 | TTFT p99 | ITL p50 | ITL p90 | ITL p99 | E2E p50 | E2E p90 | E2E p99 | output tok/s | "
)
_FIGURE_ALIGN = "---:|" * 9 + "---:|"


def _figures(level: Level | RateLevel, with_goodput: bool) -> str:
    stats = (level.ttft_ms, level.itl_ms, level.e2e_ms)
    cells = [_fmt(v) for stat in stats for v in (stat.p50, stat.p90, stat.p99)]
    return (
        " | ".join(cells) + f" | {_fmt(level.output_tokens_per_s)} | {level.requests_per_s:.2f} | "
        f"{level.requests} ({level.errors}) |" + (f" {_good(level)} |" if with_goodput else "")
    )


def _goodput_head(with_goodput: bool) -> tuple[str, str]:
    return (" goodput/s (good/measured) |", "---:|") if with_goodput else ("", "")


def _concurrency_table(a: Run, b: Run, pairs: list[tuple[Level, Level]], with_goodput: bool) -> list[str]:
    head, align = _goodput_head(with_goodput)
    out = [
        f"| concurrency | run | {_FIGURE_HEADS}requests/s | requests (errors) |{head}",
        f"|---:|---|{_FIGURE_ALIGN}---:|---:|{align}",
    ]
    for level_a, level_b in pairs:
        for run, level in ((a, level_a), (b, level_b)):
            out.append(f"| {level.concurrency} | {md(run.label)} | " + _figures(level, with_goodput))
    return out


def _rate_table(a: Run, b: Run, pairs: list[tuple[RateLevel, RateLevel]], with_goodput: bool) -> list[str]:
    """The open-loop sweep: requests sent at a fixed rate (Poisson arrivals), no cap on those in flight."""
    head, align = _goodput_head(with_goodput)
    out = [
        "Request-rate sweep (open loop: arrivals at the rate, nothing caps the requests in flight):",
        "",
        *verdicts(a, b, pairs, with_goodput),
        "",
        f"| requests/s sent | run | arrivals | max in flight | {_FIGURE_HEADS}requests/s done | requests (errors) |{head}",
        f"|---:|---|---|---:|{_FIGURE_ALIGN}---:|---:|{align}",
    ]
    for level_a, level_b in pairs:
        for run, level in ((a, level_a), (b, level_b)):
            out.append(
                f"| {level.request_rate:g} | {md(run.label)} | {md(level.arrival)} | {level.max_inflight} | "
                + _figures(level, with_goodput)
            )
    return out


def _client(run: Run) -> str:
    return f"{md(run.client.get('name'))} {md(run.client.get('version'))}"


def _engine(run: Run) -> str:
    engine = run.settings.get("engine", {})
    return (
        f"max_model_len {md(engine.get('max_model_len'))}, TP {md(engine.get('tensor_parallel_size'))}, "
        f"{md(engine.get('dtype'))}"
    )


def _kv(run: Run) -> str:
    if run.mode != "pd":
        return "none (prefill and decode on the same replica)"
    backend = run.settings.get("kv_backend")
    changed = _rehearsal_override(run, ".kv_connector_extra_config.backends")
    if changed is not None:
        return f"NIXL {md(', '.join(map(str, changed)))} (rehearsal override; the stage's: {md(backend)})"
    return f"NIXL {md(backend)}"


def _image(run: Run) -> str:
    """A rehearsal (`ops rehearse`) runs the host's packages, not the stage's container image."""
    if "rehearsal" in run.settings:
        return (
            f"none: a rehearsal runs serving_lab/pins/serve.lock's packages on the host (Ray "
            f"{md(run.settings.get('ray_version', '?'))}); the stage's is {code(run.image)}"
        )
    return code(run.image)


def _rehearsal_override(run: Run, path_end: str):
    """The new value of the first override (`ops rehearse`'s recorded `override PATH: OLD -> NEW (why)`
    lines, serving_lab/rehearse/overrides.py Override.line) whose path ends with `path_end`, or None."""
    for line in run.settings.get("rehearsal", {}).get("overrides", []):
        path, _, change = line.removeprefix("override ").partition(": ")
        if path.endswith(path_end) and " -> " in change:
            return ast.literal_eval(change.split(" -> ", 1)[1].split(" (", 1)[0])  # Override.line writes repr()
    return None


def _title(a: Run, b: Run, what: str) -> str:
    note = a.note or b.note
    lines = [f"{what}: {a.label} vs {b.label}", f"{a.hardware.title}, {a.model_id}", *([note] if note else [])]
    return "\n".join(_plain(line) for line in lines)


def plots(a: Run, b: Run, shared: Shared, out_dir: Path) -> dict[str, list[str]]:
    import matplotlib

    matplotlib.use("Agg")

    written: dict[str, list[str]] = {}
    for name, pairs in shared:
        profile = a.profile(name)
        assert profile is not None  # shared names profiles of both runs
        heading = f"{name} ({profile.input_tokens} in / {profile.output_tokens} out)"
        figure = _ProfilePlots(a, b, name, heading, pairs, Path(out_dir))
        written[name] = [_scaling_plot(figure), _distributions_plot(figure)]
    return written


@dataclass(frozen=True)
class _ProfilePlots:
    """One profile's plots: the two runs, the concurrency levels both measured, where the PNGs go."""

    a: Run
    b: Run
    name: str
    heading: str  # the profile and its prompt and answer lengths, in every title
    pairs: list[tuple[Level, Level]]
    out_dir: Path

    @property
    def xs(self) -> list[int]:
        return [level_a.concurrency for level_a, _ in self.pairs]

    def save(self, fig, what: str, file_name: str) -> str:
        import matplotlib.pyplot as plt

        fig.suptitle(_title(self.a, self.b, f"{self.heading}: {what}"), fontsize=10)
        fig.savefig(self.out_dir / file_name, dpi=90, metadata={"Software": None})
        plt.close(fig)
        return file_name


# The scaling plot's panels: y label, the figures of a level drawn, and their names in the legend.
_SCALING_PANELS: tuple[tuple[str, Callable[[Level], list[float]], tuple[str, ...]], ...] = (
    ("output tokens/s", lambda lv: [lv.output_tokens_per_s], ("",)),
    ("time to first token (ms)", lambda lv: [lv.ttft_ms.p50, lv.ttft_ms.p99], ("p50", "p99")),
    ("inter-token latency (ms)", lambda lv: [lv.itl_ms.p50, lv.itl_ms.p99], ("p50", "p99")),
    ("end-to-end latency (ms)", lambda lv: [lv.e2e_ms.p50, lv.e2e_ms.p99], ("p50", "p99")),
)


def _scaling_plot(figure: _ProfilePlots) -> str:
    """Throughput and latency against concurrency, one line per run and figure: scaling-<profile>.png."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    for axis, (ylabel, values, stats) in zip(
        (axes[0][0], axes[0][1], axes[1][0], axes[1][1]), _SCALING_PANELS, strict=True
    ):
        for index, run in enumerate((figure.a, figure.b)):
            series = [values(pair[index]) for pair in figure.pairs]
            for k, stat in enumerate(stats):
                axis.plot(
                    figure.xs,
                    [v[k] for v in series],
                    marker="o",
                    color=COLORS[index],
                    linestyle="-" if k == 0 else "--",
                    label=_plain(f"{run.label} {stat}".strip()),
                )
        axis.set_xscale("log", base=2)
        axis.set_xticks(figure.xs, [str(x) for x in figure.xs])
        axis.set_xlabel("concurrent streams")
        axis.set_ylabel(ylabel)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    return figure.save(fig, "throughput and latency against concurrency", f"scaling-{figure.name}.png")


def _distributions_plot(figure: _ProfilePlots) -> str:
    """TTFT and ITL per request, a box per run and level: distributions-<profile>.png."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), constrained_layout=True)
    for axis, field, ylabel in (
        (axes[0], "ttft_ms", "time to first token (ms)"),
        (axes[1], "itl_ms", "inter-token latency (ms, per request)"),
    ):
        _distribution_panel(axis, figure, field, ylabel)
    return figure.save(fig, "distributions per request", f"distributions-{figure.name}.png")


def _distribution_panel(axis, figure: _ProfilePlots, field: str, ylabel: str) -> None:
    """One figure's samples (`field` of Samples): run A's and run B's boxes side by side at each level."""
    positions, data, colors = [], [], []
    for slot, (level_a, level_b) in enumerate(figure.pairs):
        for index, level in enumerate((level_a, level_b)):
            positions.append(slot * 3 + index)
            data.append(getattr(level.samples, field))
            colors.append(COLORS[index])
    boxes = axis.boxplot(
        data, positions=positions, widths=0.8, patch_artist=True, showfliers=True, flierprops={"markersize": 2}
    )
    for patch, color in zip(boxes["boxes"], colors, strict=True):
        patch.set_facecolor(color)
        patch.set_alpha(0.5)
    axis.set_xticks([slot * 3 + 0.5 for slot in range(len(figure.pairs))], [str(x) for x in figure.xs])
    axis.set_xlabel("concurrent streams")
    axis.set_ylabel(ylabel)
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend([boxes["boxes"][0], boxes["boxes"][1]], [_plain(figure.a.label), _plain(figure.b.label)], fontsize=8)


def compare(a: Run, b: Run, out_dir: Path, objectives: goodput_.Objectives | None = None) -> Path:
    """Write report.md and the PNGs into out_dir; return the report's path. `objectives`: goodput's
    (default: those run A recorded, else run B's, else the first goodput's); a goodput counted under
    others is left out (n/a)."""
    shared = shared_levels(a, b)  # fails before anything is written
    objectives = objectives or _objectives(a, b)
    if objectives is not None:
        a, b = under(a, objectives), under(b, objectives)
        shared = shared_levels(a, b)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images = plots(a, b, [(name, pairs) for name, pairs in shared if pairs], out_dir)
    report = out_dir / "report.md"
    tmp = report.with_suffix(".md.tmp")
    tmp.write_text(markdown(a, b, shared, images, shared_rates(a, b), objectives))
    tmp.replace(report)
    return report
