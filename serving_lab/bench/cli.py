"""`python -m ops bench`: the four forms.

  bench --stage NAME [--url URL] [--profile NAME ...] [--label L] [--out DIR]
        run the stage's workload profiles and save <out>/<stage>/<time>-<label>.json
  bench --compare RUN_A.json RUN_B.json [--out DIR]
        write DIR/report.md and its PNG plots
  bench --merge RUN.json RUN.json ... --out RUN.json
        one run of the levels several commands measured on one deployment
  bench --calibrate [--concurrency N]
        measure the client's own overhead against the local fake server

Before the calibration and the first aiperf run, --stage checks that the endpoint answers GET
/v1/models and lists the stage's model, and that the tokenizer loads (with aiperf's own Python): each
fails in seconds, with its cause.

Exit codes: 0 done; 1 the benchmark failed (endpoint unreachable or not serving the model, tokenizer
that cannot be loaded, aiperf error, no request succeeded); 2 bad arguments, stage file or results file.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from config import CONFIG_DIR, ConfigError, load_stages
from config.topology import SERVE_PORT, serve_service

from . import aiperf, calibration, endpoint, report, results, runner

DEFAULT_OUT = Path("bench-results")


def add_parser(sub) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmark a stage's OpenAI endpoint (aiperf), compare two runs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    form = bench.add_mutually_exclusive_group(required=True)
    form.add_argument("--stage", help="run the profiles of config/<stage>.yaml's benchmark section")
    form.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"), help="compare two saved runs")
    form.add_argument(
        "--merge",
        nargs="+",
        metavar="RUN",
        help="one run of the levels several saved runs of the same deployment measured (needs --out FILE)",
    )
    form.add_argument("--calibrate", action="store_true", help="client overhead against the local fake server")
    bench.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")
    bench.add_argument("--url", help="endpoint base URL (default: kubectl port-forward to the Serve service)")
    bench.add_argument("--profile", action="append", default=[], metavar="NAME", help="only this profile (repeatable)")
    bench.add_argument("--label", help="name of this run in reports (default: the stage's serving.mode)")
    bench.add_argument("--note", default="", help="a line shown in the report and plot titles")
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


MAX_CONCURRENCY = 4096


def _concurrency(text: str) -> int:
    """argparse type of --concurrency: an integer from 1 to MAX_CONCURRENCY; anything else (1.5, -1, a
    5000-digit number, inf) is argparse's one-line error, exit 2."""
    allowed = f"allowed: an integer from 1 to {MAX_CONCURRENCY}"
    shown = text if len(text) <= 40 and text.isprintable() and text else repr(text[:40])
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown} is not an integer ({allowed})") from None
    if not 1 <= value <= MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(f"{shown} ({allowed})")
    return value


def run(args) -> int:
    try:
        if args.compare:
            return _compare(args)
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
        run_a, run_b = (results.load(Path(path)) for path in args.compare)
        path = report.compare(run_a, run_b, Path(args.out or DEFAULT_OUT / "compare"))
    except results.ResultsError as exc:
        print(f"bench --compare: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


def _merge(args) -> int:
    if not args.out or not args.out.endswith(".json"):
        print("bench --merge: --out: give the merged run's file name, e.g. --out pd.json", file=sys.stderr)
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
    tokenizer = args.tokenizer or cfg.benchmark.tokenizer or cfg.serving.model.source
    options = dict(
        executable=executable,
        out_dir=Path(args.out or DEFAULT_OUT),
        label=args.label,
        profile_names=args.profile,
        tokenizer=tokenizer,
        calibrate=not args.no_calibration,
        note=args.note,
    )
    if args.url:
        _check(cfg, args.url, executable, tokenizer)
        result, path = runner.run_stage(cfg, url=args.url, **options)
    else:
        service = serve_service(cfg.serving.service_name)
        with endpoint.port_forward(cfg.serving.namespace, service, kubectl=args.kubectl) as url:
            _check(cfg, url, executable, tokenizer)
            result, path = runner.run_stage(
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
