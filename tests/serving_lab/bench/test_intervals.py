"""serving_lab/bench/intervals.py: per-level goodput intervals and the unstable flag from aiperf's records, a
folder or its .tgz alike, ratios only with both intervals, one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from serving_lab.bench import goodput, intervals

from ...helpers import ROOT

OBJECTIVES = goodput.Objectives.of_seconds(2, 0.1)


def _write_level(run: Path, name: str, ttfts_ms: list[float], itl_ms: float = 6.0) -> None:
    folder = run / "dev" / name
    folder.mkdir(parents=True)
    lines = []
    for i, ttft in enumerate(ttfts_ms):
        start = 1_000_000_000 * i
        record = {
            "metadata": {"benchmark_phase": "profiling", "request_start_ns": start, "request_end_ns": start + 10**9},
            "metrics": {
                "time_to_first_token": {"value": ttft},
                "inter_token_latency": {"value": itl_ms},
                "output_sequence_length": {"value": 256},
            },
        }
        lines.append(json.dumps(record))
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")


def test_a_level_whose_ttft_median_is_near_the_objective_is_flagged_and_a_far_one_is_not(tmp_path):
    _write_level(tmp_path, "chat-c16", [1900.0, 2100.0, 2300.0])  # median 2,100 ms: within 20 % of 2,000
    _write_level(tmp_path, "chat-c1", [150.0, 160.0, 170.0])
    found = {n: intervals.figures(n, m, OBJECTIVES) for n, m in intervals.levels(tmp_path).items()}
    assert found["chat-c16"].unstable and found["chat-c16"].ttft is not None and found["chat-c16"].ttft.ms == 2100.0
    assert not found["chat-c1"].unstable


def test_levels_come_in_profile_then_number_order(tmp_path):
    for name in ("chat-c16", "chat-c4", "chat-c1", "long-prompt-c4"):
        _write_level(tmp_path, name, [100.0])
    assert list(intervals.levels(tmp_path)) == ["chat-c1", "chat-c4", "chat-c16", "long-prompt-c4"]


def test_a_records_archive_reads_as_its_folder(tmp_path):
    run = tmp_path / "run"
    _write_level(run, "chat-c4", [100.0, 3000.0, 120.0, 110.0])
    archive = tmp_path / "run-records.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=".")
    assert intervals.levels(archive) == intervals.levels(run)


def test_two_runs_get_a_ratio_per_shared_level_with_both_intervals(tmp_path):
    _write_level(tmp_path / "a", "chat-c1", [100.0] * 4)
    _write_level(tmp_path / "b", "chat-c1", [100.0, 3000.0, 3000.0, 3000.0])
    runs = [{n: intervals.figures(n, m, OBJECTIVES) for n, m in intervals.levels(tmp_path / r).items()} for r in "ab"]
    lines = intervals.report(runs, ["A", "B"])
    ratio_line = lines[-2]
    assert ratio_line.startswith("  chat-c1: 4.00x (a 1.00/s (95% ") and "; b 0.25/s (95% " in ratio_line


def test_a_bad_run_argument_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "serving_lab.bench.intervals",
            "--slo-ttft",
            "2",
            "--slo-itl",
            "0.1",
            str(tmp_path / "x"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"intervals: argument RUN: {tmp_path / 'x'}: not a folder or a tar archive"
    ]


RUN = str(ROOT / "evidence" / "2026-12-05-h200-ingress-bench" / "runs" / "pdb-records.tgz")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--slo-ttft", "nan", "--slo-itl", "0.1", RUN], "argument --slo-ttft: nan is not a number (allowed: a number"),
        (["--slo-ttft", "2", "--slo-itl", "1_0", RUN], "argument --slo-itl: 1_0 is not a number (allowed: a number"),
        (["--slo-ttft", "0", "--slo-itl", "0.1", RUN], "argument --slo-ttft: 0 (allowed: a number from 0.001 to 3600"),
        (["--slo-ttft", "2", "--slo-itl", "0.1", ""], "argument RUN: '': empty (give a value)"),
    ],
    ids=["nan", "underscore", "zero", "empty-run"],
)
def test_a_value_no_command_line_means_is_refused_by_its_kind(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        intervals.main(argv)
    assert info.value.code == 2
    assert capsys.readouterr().err.startswith(f"intervals: {message}")


def test_the_committed_side_by_side_16_stream_ratio_has_an_interval_that_reaches_zero():
    # the docs' correction of "28.9x at 16" (evidence/2026-12-01-h200-ab/README.md) rests on this
    runs = ROOT / "evidence" / "2026-12-01-h200-ab" / "runs"
    tuned = intervals.levels(runs / "tuned-ab-records.tgz")["chat-c16"]
    tutorial = intervals.levels(runs / "ref-text-ab-records.tgz")["chat-c16"]
    a = goodput.bootstrap(tuned, OBJECTIVES, closed_loop=True)
    b = goodput.bootstrap(tutorial, OBJECTIVES, closed_loop=True)
    assert a is not None and b is not None
    assert (a.requests, b.requests) == (48, 16) and b.low == 0.0
    assert (round(a.low, 2), round(a.high, 2), round(b.high, 2)) == (1.06, 2.17, 0.17)


def test_two_runs_state_the_median_ratios_and_whether_their_intervals_are_apart(tmp_path):
    _write_level(tmp_path / "a", "chat-c1", [100.0 + i % 5 for i in range(40)], itl_ms=6.0)
    _write_level(tmp_path / "b", "chat-c1", [200.0 + i % 5 for i in range(40)], itl_ms=6.0)
    runs = [{n: intervals.figures(n, m, OBJECTIVES) for n, m in intervals.levels(tmp_path / r).items()} for r in "ab"]
    assert intervals.report(runs, ["A", "B"])[-1] == (
        "    TTFT p50 0.50x (apart: a rerun keeps the order); ITL p50 1.00x (overlapping: no order stated)"
    )


def test_the_committed_ingress_arms_differ_in_no_median_at_any_level():
    """evidence/2026-12-05-h200-ingress-bench/README.md: PD through Serve's proxy and through HAProxy, chat."""
    runs = ROOT / "evidence" / "2026-12-05-h200-ingress-bench" / "runs"
    proxy, haproxy = (intervals.levels(runs / f"{name}-records.tgz") for name in ("pdb", "hab"))
    for level in ("chat-c1", "chat-c4", "chat-c16"):
        a, b = (intervals.figures(level, arm[level], OBJECTIVES) for arm in (proxy, haproxy))
        assert a.ttft and b.ttft and a.itl and b.itl
        assert not a.ttft.apart_from(b.ttft) and not a.itl.apart_from(b.itl), level
    assert (round(a.ttft.ms, 1), round(b.ttft.ms, 1)) == (368.2, 378.3)
