"""The sample under docs/benchmark-sample/ stays true to the code: its runs load with today's results
schema, and `bench --compare` on them writes exactly the committed report."""

from __future__ import annotations

from serving_lab.bench import report, results

from ...helpers import ROOT

SAMPLE = ROOT / "docs" / "benchmark-sample"


def test_committed_report_is_what_compare_writes_from_the_committed_runs(tmp_path):
    pd, colocated = (results.load(SAMPLE / f"run-{mode}.json") for mode in ("pd", "colocated"))
    assert "fake server" in pd.note and pd.note == colocated.note
    written = report.compare(pd, colocated, tmp_path)
    assert written.read_text() == (SAMPLE / "report.md").read_text()
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(p.name for p in SAMPLE.glob("*.png"))
