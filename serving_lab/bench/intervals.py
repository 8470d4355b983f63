"""Each level's goodput with its bootstrap interval, its request count, its TTFT and ITL medians with theirs, and the
unstable flag (goodput.py's rules for figures that hold on a rerun), from aiperf's per-request records; with two
runs, the ratios of each level they share: goodput's stated only with both intervals, the medians' with whether
their intervals are apart. For committed runs as well as fresh ones:

    python -m serving_lab.bench.intervals --slo-ttft 2 --slo-itl 0.1 RUN_A [RUN_B]

RUN is a folder holding <level>/profile_export.jsonl files at any depth (what `ops bench` writes) or a .tgz of one
(what serving_lab/scripts/rehearsal_device_run.sh brings back as NAME-records.tgz). Exit 2 with one line for a bad argument."""

from __future__ import annotations

import argparse
import re
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from clients.cli_options import number, path_kind, text

from . import aiperf, goodput


@dataclass(frozen=True)
class LevelFigures:
    """One level: its measured requests' goodput interval, the TTFT and ITL medians with theirs, and whether the TTFT
    median is near the objective."""

    name: str
    interval: goodput.Interval | None
    ttft: goodput.Median | None
    itl: goodput.Median | None
    unstable: bool


def _order(name: str) -> tuple[str, float, str]:
    """chat-c1, chat-c4, chat-c16: by profile, then by the level's number (concurrency or rate)."""
    found = re.fullmatch(r"(.*)-[a-z]+([0-9.]+)", name)
    return (found.group(1), float(found.group(2)), name) if found else (name, 0.0, name)


def _levels_in(folder: Path) -> dict[str, list[aiperf.RequestMetrics]]:
    found = {records.parent.name: aiperf.requests(records.parent) for records in folder.rglob(aiperf.RECORDS)}
    return {name: found[name] for name in sorted(found, key=_order)}


def levels(source: Path) -> dict[str, list[aiperf.RequestMetrics]]:
    """Each level's measured requests, by the level's folder name (e.g. chat-c16)."""
    if source.is_dir():
        return _levels_in(source)
    with tempfile.TemporaryDirectory() as unpacked, tarfile.open(source) as archive:
        archive.extractall(unpacked, filter="data")
        return _levels_in(Path(unpacked))


def figures(name: str, measured: list[aiperf.RequestMetrics], objectives: goodput.Objectives) -> LevelFigures:
    ok = [r for r in measured if r.error is None]
    ttft = goodput.median_bootstrap([r.ttft_ms for r in ok if r.ttft_ms is not None])
    itl = goodput.median_bootstrap([r.itl_ms for r in ok if r.itl_ms is not None])
    flagged = ttft is not None and goodput.unstable(ttft.ms, objectives)
    closed_loop = re.search(r"-c[0-9]+$", name) is not None  # a concurrency level (runner.py names chat-c16)
    return LevelFigures(name, goodput.bootstrap(measured, objectives, closed_loop=closed_loop), ttft, itl, flagged)


def _line(level: LevelFigures) -> str:
    shown = level.interval.text() if level.interval else "no goodput (no timed request)"
    ttft = f"TTFT p50 {level.ttft.text()}" if level.ttft else "no TTFT"
    itl = f"ITL p50 {level.itl.text()}" if level.itl else "no ITL"
    flag = "; UNSTABLE: TTFT p50 near the objective" if level.unstable else ""
    return f"  {level.name}: {shown}; {ttft}; {itl}{flag}"


def _median_ratio(what: str, a: goodput.Median | None, b: goodput.Median | None) -> str:
    if a is None or b is None or b.ms <= 0:
        return f"{what} not stated (a level without it)"
    verdict = "apart: a rerun keeps the order" if a.apart_from(b) else "overlapping: no order stated"
    return f"{what} {a.ms / b.ms:.2f}x ({verdict})"


def report(runs: Sequence[dict[str, LevelFigures]], labels: Sequence[str]) -> list[str]:
    lines = []
    for label, run in zip(labels, runs, strict=True):
        lines.append(f"{label}:")
        lines.extend(_line(level) for level in run.values())
    if len(runs) == 2:
        lines.append("ratios (A over B, each with both intervals):")
        for name in [n for n in runs[0] if n in runs[1]]:
            a, b = runs[0][name], runs[1][name]
            stated = goodput.ratio(a.interval, b.interval)
            lines.append(f"  {name}: {stated or 'not stated (a level without goodput, or B is 0)'}")
            lines.append(f"    {_median_ratio('TTFT p50', a.ttft, b.ttft)}; {_median_ratio('ITL p50', a.itl, b.itl)}")
    return lines


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"intervals: {message}", file=sys.stderr)  # one line, not argparse's usage block
        sys.exit(2)


def _run_source(value: str) -> Path:
    """A RUN: a folder, or a regular file that is a tar archive (never a FIFO, which tarfile would wait on)."""
    kind = path_kind(text(value))
    if kind == "a folder" or (kind == "a regular file" and tarfile.is_tarfile(value)):
        return Path(value)
    raise argparse.ArgumentTypeError(f"{value}: not a folder or a tar archive")


SLO_SECONDS = number(float, 0.001, 3600, "seconds")  # an objective from a millisecond to an hour


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m serving_lab.bench.intervals", description=__doc__.split("\n")[0])
    parser.add_argument("--slo-ttft", type=SLO_SECONDS, required=True, help="TTFT objective, seconds")
    parser.add_argument("--slo-itl", type=SLO_SECONDS, required=True, help="ITL objective, seconds")
    parser.add_argument(
        "runs", nargs="+", type=_run_source, metavar="RUN", help="a run's folder or records .tgz (1 or 2)"
    )
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error(f"RUN: {len(args.runs)} given (allowed: 1 or 2)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    objectives = goodput.Objectives.of_seconds(args.slo_ttft, args.slo_itl)
    runs = [{n: figures(n, m, objectives) for n, m in levels(path).items()} for path in args.runs]
    if not any(runs):
        print(f"intervals: no {aiperf.RECORDS} in {', '.join(map(str, args.runs))}", file=sys.stderr)
        return 1
    labels = [f"{'AB'[i]} = {path}" for i, path in enumerate(args.runs)]
    print("\n".join(report(runs, labels)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
