"""The GPU evidence of evidence/2026-12-03-h200-startup/: the README's start-up and import figures
are the committed runs' own (consoles, worker tails, the import times as they came back)."""

from __future__ import annotations

import re
import tarfile

import pytest

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-03-h200-startup"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"


@pytest.mark.parametrize("run", ["fresh", "warm", "warm2"])
def test_each_runs_running_time_and_checks_are_the_readmes(run):
    console = (RUNS / f"{run}.log").read_text()
    found = re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", console)
    assert found is not None and "OK: 9 passed, 0 failed, 1 warnings, 0 skipped" in console
    (row,) = [line for line in README.splitlines() if line.startswith(f"| {run} (")]
    assert f"{found[1]} s" in row and "9 passed, 0 failed, 1 warning" in row


def test_the_import_times_are_the_hosts():
    with tarfile.open(RUNS / "imports.tgz") as tar:
        member = tar.extractfile("imports/summary.txt")
        assert member is not None
        summary = member.read().decode()
    for module, seconds in re.findall(r"^(\S+) ([0-9.]+) s$", summary, flags=re.MULTILINE):
        assert f"| `{module}`" in README and f"| {seconds} s |" in README


def test_the_h200_only_warm_up_ran_in_both_warm_starts():
    for run in ("warm", "warm2"):
        assert "Warming up ll_bf16 router GEMM kernels" in (RUNS / f"{run}-workers.txt").read_text()
