"""The GPU evidence of evidence/2026-12-02-h200-pd-vs-colocated/: the README's table and start-up figures are the
committed runs' own (the consoles and the per-request records as they came back from the host)."""

from __future__ import annotations

import re

import pytest

from serving_lab.bench import goodput, intervals

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-02-h200-pd-vs-colocated"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"
OBJECTIVES = goodput.Objectives.of_seconds(2.0, 0.1)
LEVEL_LINE = re.compile(r"concurrency (\d+): \d+ requests \.\.\.\n  TTFT p50 ([\d.]+) ms, ITL p50 ([\d.]+) ms")


def _console(name: str) -> dict[int, tuple[float, float]]:
    """streams -> (TTFT p50, ITL p50) as the run printed them."""
    text = (RUNS / f"{name}.log").read_text()
    return {int(m[1]): (float(m[2]), float(m[3])) for m in LEVEL_LINE.finditer(text)}


def _row(streams: int) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {streams} | ")]
    return [cell.strip() for cell in line.strip("|").split("|")]


@pytest.mark.parametrize("streams", [1, 4, 16])
def test_each_rows_latencies_are_the_consoles(streams):
    pd, colocated = _console("pd2")[streams], _console("col1")[streams]
    row = _row(streams)
    assert row[1:3] == [f"{pd[0]:.1f} ms", f"{colocated[0]:.1f} ms"]
    assert row[3].strip("*") == f"{pd[0] / colocated[0]:.2f}x"
    assert row[4:6] == [f"{pd[1]:.2f} ms", f"{colocated[1]:.2f} ms"]


@pytest.mark.parametrize("streams", [1, 4, 16])
def test_each_rows_goodput_and_interval_come_from_the_records(streams):
    name = f"chat-c{streams}"
    pd = intervals.figures(name, intervals.levels(RUNS / "pd2-records.tgz")[name], OBJECTIVES)
    colocated = intervals.figures(name, intervals.levels(RUNS / "col1-records.tgz")[name], OBJECTIVES)
    assert pd.interval is not None and colocated.interval is not None
    assert not pd.unstable and not colocated.unstable  # as the README says: none flagged
    row = _row(streams)
    for cell, found in ((row[6], pd.interval), (row[7], colocated.interval)):
        assert cell == f"{found.per_s:.2f}/s ({found.low:.2f}-{found.high:.2f}, {found.requests} req)"
    assert row[8].strip("*") == f"{pd.interval.per_s / colocated.interval.per_s:.2f}x"


def test_the_targets_verdicts_follow_the_figures():
    pd, colocated = _console("pd2"), _console("col1")
    assert pd[1][0] / colocated[1][0] > 1.3 and "not met (1.41x)" in README
    assert pd[16][0] > colocated[16][0] and "not met (1.60x)" in README
    assert all(pd[s][1] <= colocated[s][1] for s in (4, 16)) and "**met** (0.49x and 0.52x)" in README


@pytest.mark.parametrize(("name", "seconds"), [("pd1", 406), ("pd2", 206), ("col1", 303)])
def test_the_start_up_times_are_the_runs(name, seconds):
    found = re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", (RUNS / f"{name}.log").read_text())
    assert found is not None and int(found[1]) == seconds
    assert f"{seconds} s" in README.split("## Start-up")[1]


def test_each_engines_init_after_loading_is_the_logs():
    cells = []
    for name in ("pd1", "pd2", "col1"):
        inits = sorted(
            map(float, re.findall(r"engine init after loading ([\d.]+) s", (RUNS / f"{name}.log").read_text()))
        )
        assert len(inits) == 2  # two engines (colocated: the replaced replica logged none)
        cells.append(f"{inits[0]:.1f}-{inits[-1]:.1f} s")
    assert f"| {' | '.join(cells)} |" in README
