"""Issue #53's settings matrix from rehearsal folders: one Markdown row per arm and mode.

    python3 -m serving_lab.rehearse.matrix [--profile chat] NAME=FOLDER [NAME=FOLDER ...]

FOLDER is one rehearsal's `<out>/<stage>/`: its report-<mode>.json and, with --bench, the benchmark runs under
`runs/<stage>/<time>-<label>.json` (cli.py `_bench`: out_dir=out / "runs"). Each row gives the KV cache tokens of the arm's smallest engine, the seconds from
`ray start` to RUNNING, and at each concurrency level of the profile the TTFT and ITL medians and the goodput with
its bootstrap interval, as the rehearsal measured them: nothing is computed again."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clients import kube
from clients.cli_options import OneLineParser, file_label, folder, text
from clients.files import FileRefused, read_regular
from serving_lab.bench import results

RUN_FILE = re.compile(r"[0-9]{8}T[0-9]{6}Z-.+\.json")  # serving_lab/bench/runner.py: <time>-<label>.json
REPORT_MAX_BYTES = 16 * 2**20


class MatrixError(Exception):
    """A folder that holds no rehearsal, or a file in it that is not what its name says: one line."""


@dataclass(frozen=True)
class Row:
    arm: str
    mode: str
    kv_tokens: int | None  # the smallest engine's KV cache, in tokens
    running_s: float | None  # ray start -> RUNNING
    levels: dict[int, results.Level]  # the profile's concurrency levels, from the benchmark run


def rows(arm: str, path: Path, profile: str) -> list[Row]:
    """The arm's rows: one per report-<mode>.json in `path`, with that mode's newest benchmark run."""
    reports = sorted(path.glob("report-*.json"))
    if not reports:
        raise MatrixError(f"{path}: no report-<mode>.json (a rehearsal's <out>/<stage>/ folder)")
    runs = [results.load(file) for file in sorted(path.glob("runs/*/*.json")) if RUN_FILE.fullmatch(file.name)]
    found = []
    for report in reports:
        mode = report.stem.removeprefix("report-")
        kv_tokens, running_s = _report_figures(report)
        run = next((run for run in reversed(runs) if run.mode == mode), None)
        levels = run.profile(profile) if run else None
        found.append(
            Row(arm, mode, kv_tokens, running_s, {lv.concurrency: lv for lv in levels.levels} if levels else {})
        )
    return found


def _report_figures(path: Path) -> tuple[int | None, float | None]:
    """(smallest engine's KV tokens, seconds to RUNNING) of a report-<mode>.json."""
    try:
        checks = kube.parse_json(read_regular(path, REPORT_MAX_BYTES))["checks"]
        # an engine whose KV cache was not found has None there (checks.engine_memory)
        tokens = [
            c["data"]["kv_cache_tokens"] for c in checks if (c.get("data") or {}).get("kv_cache_tokens") is not None
        ]
        running = [c["data"]["seconds"] for c in checks if c["name"] == "application RUNNING" and c["status"] == "pass"]
        kv = min(int(t) for t in tokens) if tokens else None
        return kv, float(running[0]) if running else None
    except FileRefused as exc:
        raise MatrixError(f"{path}: {exc}: not a rehearsal report") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # ValueError: kube.TooDeep too
        raise MatrixError(f"{path}: not a rehearsal report ({type(exc).__name__}: {str(exc)[:120]})") from None


def markdown(found: Sequence[Row], profile: str) -> str:
    """The table: a column per concurrency level any row has."""
    concurrencies = sorted({c for row in found for c in row.levels})
    head = ["arm", "mode", "KV tokens/engine", "RUNNING s"] + [
        f"c={c}: TTFT / ITL p50 ms, goodput/s" for c in concurrencies
    ]
    lines = [f"profile {profile}", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in found:
        cells = [row.arm, row.mode, _count(row.kv_tokens), _count(row.running_s)]
        cells += [_level(row.levels.get(c)) for c in concurrencies]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _level(level: results.Level | None) -> str:
    if level is None:
        return "n/a"
    figures = f"{level.ttft_ms.p50:.1f} / {level.itl_ms.p50:.2f}"
    good = level.goodput
    if good is None:
        return f"{figures}, n/a"
    interval = f" [{good.low_per_s:.2f}-{good.high_per_s:.2f}]" if good.low_per_s is not None else ""
    return f"{figures}, {good.per_s:.2f}{interval} of {good.requests}"


def _arm(value: str) -> tuple[str, Path]:
    """NAME=FOLDER."""
    name, sep, path = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text(value)!r} is not NAME=FOLDER")
    return file_label(name), Path(folder(path))


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python3 -m serving_lab.rehearse.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("arms", nargs="+", type=_arm, metavar="NAME=FOLDER")
    parser.add_argument("--profile", type=text, default="chat", help="the benchmark profile (default chat)")
    args = parser.parse_args(argv)
    try:
        found = [row for name, path in args.arms for row in rows(name, path, args.profile)]
    except (MatrixError, results.ResultsError) as exc:
        print(f"matrix: {exc}", file=sys.stderr)
        return 2
    print(markdown(found, args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
