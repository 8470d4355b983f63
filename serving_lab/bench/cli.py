"""`python -m ops bench`: the five forms.

  bench --stage NAME [--url URL] [--profile NAME ...] [--label L] [--out DIR]
        [--request-rates R,R,...] [--rate-seconds S] [--sweep both|concurrency|rate] [--slo-ttft S] [--slo-itl S]
        run the stage's workload profiles (each profile's concurrency sweep, then its request-rate sweep)
        and save <out>/<stage>/<time>-<label>.json
  bench --compare RUN_A.json RUN_B.json [--out DIR] [--slo-ttft S] [--slo-itl S]
        write DIR/report.md and its PNG plots; the runs ranked by goodput per profile
  bench --goodput RUN.json [RUN.json ...] [--out DIR] [--slo-ttft S] [--slo-itl S]
        print each run's goodput per level and the runs ranked by it per profile; with --out, write
        DIR/goodput.md and each run with its goodput (DIR/<file name>)
  bench --merge RUN.json RUN.json ... --out RUN.json
        one run of the levels several commands measured on one deployment
  bench --calibrate [--concurrency N]
        measure the client's own overhead against the local fake server

Goodput (docs/BENCHMARK.md, serving_lab/bench/goodput.py): per level, the measured requests with TTFT and
ITL within the objectives, per second from the first request's start to the last one's end. --compare and
--goodput count it anew from aiperf's records beside each run's JSON (<time>-<label>/<profile>-c<N>/,
-r<rate>/), so runs saved before goodput get one too; the objectives: --slo-ttft/--slo-itl, else those the
first run recorded, else the stage file's (config-dir/<stage>.yaml), else the schema's defaults.

Before the calibration and the first aiperf run, --stage checks that the endpoint answers GET
/v1/models and lists the stage's model, and that the tokenizer loads (with aiperf's own Python): each
fails in seconds, with its cause.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from clients.cli_options import decimal, file_label, http_url, number, output_file, output_folder
from clients.text import shown
from config import CONFIG_DIR, ConfigError, load_stages
from config.schema import Observability, Slo, is_valid_name
from config.topology import SERVE_PORT, serve_service

from . import aiperf, calibration, endpoint, goodput, report, results, runner

DEFAULT_OUT = Path("bench-results")
# What installs `ops bench`'s packages (README, "Which command needs which set-up"): requirements-bench.txt into
# .venv-bench, which scripts/bench.sh runs. A Python without them gets this one line, not an internal error.
BENCH_SETUP = "scripts/setup.sh --bench"


def missing_package(exc: ModuleNotFoundError, form: str) -> str:
    """The one line for a package of the bench set-up that this Python lacks."""
    return (
        f"bench {form}: this Python ({sys.executable}) lacks the package {exc.name or '?'} of the benchmark's "
        f"set-up: run {BENCH_SETUP}, then scripts/bench.sh {form} ... (its .venv-bench has every package)"
    )


def add_parser(sub) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmark a stage's OpenAI endpoint (aiperf), compare two runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_forms(bench)
    _add_run_options(bench)
    _add_sweep_options(bench)
    _add_objectives(bench)


def _add_forms(bench: argparse.ArgumentParser) -> None:
    """The five forms, one of them required."""
    form = bench.add_mutually_exclusive_group(required=True)
    form.add_argument("--stage", help="run the profiles of config/<stage>.yaml's benchmark section")
    form.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two saved runs")
    form.add_argument(
        "--goodput", nargs="+", metavar="RUN", help="goodput of saved runs from their aiperf records, ranked"
    )
    form.add_argument(
        "--merge",
        nargs="+",
        metavar="RUN",
        help="one run of the levels several saved runs of the same deployment measured (needs --out FILE)",
    )
    form.add_argument("--calibrate", action="store_true", help="client overhead against the local fake server")


def _add_run_options(bench: argparse.ArgumentParser) -> None:
    """Where the stage, endpoint, tools and results are, and what a run is called."""
    bench.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")
    bench.add_argument(
        "--url", type=http_url, help="endpoint base URL (default: kubectl port-forward to the Serve service)"
    )
    bench.add_argument("--profile", action="append", default=[], metavar="NAME", help="only this profile (repeatable)")
    bench.add_argument(
        "--label", type=file_label, help="name of this run in reports (default: the stage's serving.mode)"
    )
    bench.add_argument("--note", help="a line shown in the report and plot titles")
    bench.add_argument(
        "--tokenizer", help="tokenizer id or local folder (default: benchmark.tokenizer, else serving.model.source)"
    )
    bench.add_argument(
        "--out", help=f"output folder (default: {DEFAULT_OUT}/ for runs, {DEFAULT_OUT}/compare/ for reports)"
    )
    bench.add_argument("--aiperf", help="aiperf executable (default: the one scripts/bench.sh installs)")
    bench.add_argument("--kubectl", default="kubectl", help="kubectl executable for the port-forward")
    bench.add_argument("--no-calibration", action="store_true", help="skip the client-overhead calibration")
    bench.add_argument("--concurrency", type=_concurrency, default=64, help="--calibrate: concurrent streams")


def _add_sweep_options(bench: argparse.ArgumentParser) -> None:
    """--stage: which sweeps run, at which request rates, how long a rate level is."""
    bench.add_argument(
        "--request-rates",
        type=_rates,
        metavar="R,R,...",
        help="--stage: these request rates (requests/s) for every profile instead of its request_rates",
    )
    bench.add_argument(
        "--sweep",
        choices=("both", "concurrency", "rate"),
        default="both",
        help="--stage: run the concurrency sweep, the request-rate sweep or both (default)",
    )
    bench.add_argument(
        "--rate-seconds",
        type=_seconds(3600),
        metavar="SECONDS",
        help=f"--stage: requests per rate level = max(16, rate x this) (default {runner.RATE_LEVEL_SECONDS:g})",
    )
    add_min_requests(bench, "--stage")


def add_min_requests(cmd: argparse.ArgumentParser, scope: str) -> None:
    """--min-requests: the fewest requests a concurrency level sends (ops bench and ops rehearse --bench)."""
    cmd.add_argument(
        "--min-requests",
        type=min_requests,
        default=runner.MIN_LEVEL_REQUESTS,
        metavar="N",
        help=f"{scope}: each concurrency level sends at least N measured requests (default "
        f"{runner.MIN_LEVEL_REQUESTS}: fewer give a goodput interval caveated as such)",
    )


def min_requests(text: str) -> int:
    """argparse type of --min-requests: an integer from 1 to MAX_MIN_REQUESTS."""
    return number(int, 1, MAX_MIN_REQUESTS)(text)


def _add_objectives(bench: argparse.ArgumentParser) -> None:
    """Goodput's objectives, over the recorded or the stage file's."""
    bench.add_argument(
        "--slo-ttft",
        type=_seconds(600),
        metavar="SECONDS",
        help="goodput's TTFT objective (default: benchmark.slo.ttft_seconds, else observability.ttft_p99_slo_seconds)",
    )
    bench.add_argument(
        "--slo-itl",
        type=_seconds(60),
        metavar="SECONDS",
        help="goodput's inter-token latency objective (default: benchmark.slo.itl_seconds, 0.1)",
    )


MAX_CONCURRENCY = 4096


# argparse type of --concurrency: anything else (1.5, -1, a 5000-digit number, inf) is its one-line error, exit 2.
_concurrency = number(int, 1, MAX_CONCURRENCY)


MAX_RATE = 1000.0
MAX_MIN_REQUESTS = 100_000  # a level of more would run for hours at any concurrency a stage sweeps


def _seconds(limit: float):
    """argparse type of an objective: seconds, more than 0 and at most `limit` (the stage file's bounds)."""

    def parse(text: str) -> float:
        value = decimal(text, float)
        if not 0 < value <= limit:
            raise argparse.ArgumentTypeError(f"{value:g} (allowed: more than 0 and at most {limit:g} seconds)")
        return value

    return parse


def _rates(text: str) -> list[float]:
    """argparse type of --request-rates: requests/s, comma-separated, ascending, 0.01 to MAX_RATE each."""
    values = [decimal(part.strip(), float) for part in text.split(",")]
    for value in values:
        if not 0.01 <= value <= MAX_RATE:
            raise argparse.ArgumentTypeError(f"{value:g} (allowed: 0.01 to {MAX_RATE:g} requests/s)")
    if values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"{text}: list each rate once, in ascending order (e.g. 0.5,1,2,4)")
    return values


def run(args) -> int:
    try:
        _check_out(args)
    except argparse.ArgumentTypeError as exc:
        print(f"bench: --out: {exc}", file=sys.stderr)
        return 2
    try:
        if args.compare:
            return _compare(args)
        if args.goodput:
            return _goodput(args)
        if args.merge:
            return _merge(args)
        executable = aiperf.find_executable(args.aiperf)
        if args.calibrate:
            return _calibrate(args, executable)
        return _stage(args, executable)
    except (aiperf.BenchError, OSError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1


def _compare(args) -> int:
    try:
        import matplotlib  # noqa: F401  the plots' library (and numpy), before anything is read or written
    except ModuleNotFoundError as exc:
        print(missing_package(exc, "--compare"), file=sys.stderr)
        return 2
    try:
        (a, b), objectives = _counted(args, [Path(path) for path in args.compare], "--compare")
        path = report.compare(a, b, Path(args.out or DEFAULT_OUT / "compare"), objectives=objectives)
    except (results.ResultsError, ConfigError) as exc:
        print(f"bench --compare: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


def objectives_for(args, runs: list[results.Run]) -> tuple[goodput.Objectives, str]:
    """Goodput's objectives for saved runs, and where they came from: --slo-ttft/--slo-itl over those the
    first run that recorded any did (settings.slo), else its stage file's in --config-dir, else the schema's
    defaults (observability.ttft_p99_slo_seconds, benchmark.slo.itl_seconds)."""
    recorded = next(
        ((found, run) for run in runs if (found := goodput.Objectives.of_settings(run.settings)) is not None), None
    )
    if recorded is not None:
        base, source = recorded[0], f"recorded by run {shown(repr(recorded[1].label), report.SHOWN_CHARS)}"
    else:
        stage = next((run.stage for run in runs if is_valid_name(run.stage)), None)
        stage_file = Path(args.config_dir) / f"{stage}.yaml" if stage else None
        if stage_file is not None and stage_file.is_file():
            (cfg,) = load_stages(args.config_dir, only=stage)
            base, source = goodput.Objectives.of_stage(cfg), f"stage file {stage_file}"
        else:
            base = goodput.Objectives.of_seconds(Observability().ttft_p99_slo_seconds, Slo().itl_seconds)
            source = "the stage schema's defaults"
    if args.slo_ttft is None and args.slo_itl is None:
        return base, source
    chosen = goodput.Objectives.of_seconds(
        args.slo_ttft if args.slo_ttft is not None else base.ttft_ms / goodput.MS,
        args.slo_itl if args.slo_itl is not None else base.itl_ms / goodput.MS,
    )
    return chosen, f"--slo-ttft/--slo-itl over those {source}"


def _counted(args, paths: list[Path], form: str) -> tuple[list[results.Run], goodput.Objectives]:
    """The runs, each level's goodput counted anew from the records beside its JSON (stderr says which
    levels have none there), and the objectives."""
    runs = [results.load(path) for path in paths]
    objectives, source = objectives_for(args, runs)
    print(f"bench {form}: goodput objectives {objectives.title} ({source})", file=sys.stderr)
    counted = []
    for path, run in zip(paths, runs, strict=True):
        run, missing = goodput.recount(run, path, objectives)
        if missing:
            print(
                f"bench {form}: {path}: no aiperf records beside it for {len(missing)} level(s) "
                f"({', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''}): their goodput is the one "
                f"saved under the same objectives, else n/a",
                file=sys.stderr,
            )
        counted.append(run)
    return counted, objectives


def _goodput(args) -> int:
    paths = [Path(path) for path in args.goodput]
    out = Path(args.out) if args.out else None
    names = [path.name for path in paths]
    if out is not None and len(set(names)) != len(names):
        print("bench --goodput: --out: two runs share a file name; give runs of distinct names", file=sys.stderr)
        return 2
    try:
        runs, objectives = _counted(args, paths, "--goodput")
    except (results.ResultsError, ConfigError) as exc:
        print(f"bench --goodput: {exc}", file=sys.stderr)
        return 2
    text = goodput_markdown(runs, objectives)
    print(text, end="")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for path, run in zip(paths, runs, strict=True):
            run.save(out / path.name)
        (out / "goodput.md").write_text(text)
        print(f"written: {out / 'goodput.md'} and {len(runs)} run(s) with their goodput in {out}", file=sys.stderr)
    return 0


def goodput_markdown(runs: list[results.Run], objectives: goodput.Objectives) -> str:
    """The runs ranked by goodput per profile (report.goodput_section), then every level's goodput."""
    labels = [run.label for run in runs]
    if len(set(labels)) < len(labels):  # several commands' runs of one mode: tell them apart
        labels = [f"{run.label} ({run.created_at})" for run in runs]
    names = list(dict.fromkeys(profile.name for run in runs for profile in run.profiles))
    per_profile = [
        (
            name,
            [
                (label, [*p.levels, *p.rate_levels])
                for label, run in zip(labels, runs, strict=True)
                if (p := run.profile(name))
            ],
        )
        for name in names
    ]
    out = report.goodput_section(per_profile, objectives)
    out += [
        (
            "| run | profile | level | goodput/s | 95% interval | good / measured | attainment | duration (s) | "
            "aiperf's goodput/s |"
        ),
        "|---|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for label, run in zip(labels, runs, strict=True):
        label = report.md(label)  # a results file's text (report.md says why)
        for profile in run.profiles:
            for level in profile.all_levels():
                g = level.goodput
                if g is None:
                    out.append(f"| {label} | {profile.name} | {level.load} | n/a | | | | | |")
                    continue
                theirs = "-" if g.aiperf_per_s is None else f"{g.aiperf_per_s:.2f}"
                out.append(
                    f"| {label} | {profile.name} | {level.load} | {g.per_s:.2f} | {_interval_cell(level)} | "
                    f"{g.good} / {g.requests} | {g.attainment:.0%} | {g.duration_s:.1f} | {theirs} |"
                )
    return "\n".join(out) + "\n"


def _interval_cell(level: results.Level | results.RateLevel) -> str:
    """A level's goodput interval, caveated under goodput.MIN_REQUESTS requests, flagged near the TTFT objective."""
    interval = goodput.interval_of(level.goodput)
    if interval is None:
        return "-"
    few = "" if interval.enough else f" ({interval.requests} requests)"
    return f"{interval.low:.2f}-{interval.high:.2f}{few}" + (" unstable" if goodput.level_unstable(level) else "")


def _check_out(args) -> None:
    """--out before any work: the merged run's file for --merge, else a folder for the runs or the report."""
    if args.out:
        (output_file if args.merge else output_folder)(args.out)


def _merge(args) -> int:
    if not args.out or not args.out.endswith(".json"):
        print("bench --merge: --out: give the merged run's file name, e.g. --out pd.json", file=sys.stderr)
        return 2
    if os.path.realpath(args.out) in {os.path.realpath(path) for path in args.merge}:  # never raises on a loop
        print(f"bench --merge: --out: {shown(args.out)} is one of the runs to merge: name a new file", file=sys.stderr)
        return 2
    try:
        merged = results.merge([results.load(Path(path)) for path in args.merge])
    except results.ResultsError as exc:
        print(f"bench --merge: {exc}", file=sys.stderr)
        return 2
    print(f"merged: {merged.save(Path(args.out))}")
    return 0


def _calibrate(args, executable: str) -> int:
    if not 1 <= args.concurrency <= MAX_CONCURRENCY:  # argparse checked it; a caller may build args itself
        print(
            f"bench --calibrate: --concurrency: {args.concurrency} (allowed: 1 to {MAX_CONCURRENCY})", file=sys.stderr
        )
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-calibration-") as work:
        overhead, level = calibration.measure(executable, Path(work), concurrency=args.concurrency)
    print(
        f"client overhead per request at {overhead.concurrency} streams ({overhead.requests} requests; "
        f"injected TTFT {overhead.injected_ttft_ms:.0f} ms, ITL {overhead.injected_itl_ms:.0f} ms):"
    )
    for name, stats in (("TTFT", overhead.ttft_ms), ("ITL", overhead.itl_ms), ("end-to-end", overhead.e2e_ms)):
        print(f"  {name:<10} p50 {stats.p50:+.2f} ms  p90 {stats.p90:+.2f} ms  p99 {stats.p99:+.2f} ms")
    print(f"reported medians: TTFT {level.ttft_ms.p50:.1f} ms, ITL {level.itl_ms.p50:.2f} ms")
    return 0


def _stage(args, executable: str) -> int:
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
        runner.select(cfg, args.profile)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except aiperf.BenchError as exc:
        print(f"bench --stage {args.stage}: {exc}", file=sys.stderr)
        return 2
    if args.request_rates is not None and args.sweep == "concurrency":
        print(f"bench --stage {args.stage}: --request-rates: not with --sweep concurrency", file=sys.stderr)
        return 2
    selected = runner.select(cfg, args.profile)
    if args.sweep == "rate" and args.request_rates is None and not any(p.request_rates for p in selected):
        print(
            f"bench --stage {args.stage}: --sweep rate: no profile to run lists request_rates "
            f"(benchmark.profiles[].request_rates), and no --request-rates R,R,... was given",
            file=sys.stderr,
        )
        return 2
    tokenizer = args.tokenizer or cfg.benchmark.tokenizer or cfg.serving.model.source
    options = {
        "executable": executable,
        "out_dir": Path(args.out or DEFAULT_OUT),
        "label": args.label,
        "profile_names": args.profile,
        "tokenizer": tokenizer,
        "calibrate": not args.no_calibration,
        "note": args.note or "",
        "objectives": goodput.Objectives.of_stage(cfg, args.slo_ttft, args.slo_itl),
        "adjust": runner.Adjustments(
            levels=[] if args.sweep == "rate" else None,
            request_rates=[] if args.sweep == "concurrency" else args.request_rates,
            rate_seconds=args.rate_seconds,
            min_requests=args.min_requests,
        ),
    }
    if args.url:
        _check(cfg, args.url, executable, tokenizer)
        _, path = runner.run_stage(cfg, url=args.url, **options)
    else:
        service = serve_service(cfg.serving.service_name)
        with endpoint.port_forward(cfg.serving.namespace, service, kubectl=args.kubectl) as url:
            _check(cfg, url, executable, tokenizer)
            _, path = runner.run_stage(
                cfg,
                url=url,
                endpoint_label=f"{cfg.serving.namespace}/{service}:{SERVE_PORT} (kubectl port-forward)",
                **options,
            )
    print(f"results: {path}")
    return 0


def _check(cfg, url: str, executable: str, tokenizer: str) -> None:
    """The endpoint serves the model and the tokenizer loads: before the calibration's minute, not after."""
    endpoint.check_models(url, cfg.serving.model.id)
    endpoint.check_tokenizer(executable, tokenizer)
    print(f"checked: {url} serves {cfg.serving.model.id!r}; tokenizer {tokenizer!r} loads", file=sys.stderr, flush=True)
