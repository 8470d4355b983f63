"""The GPU results committed under evidence/ load as benchmark runs, each mode's merged run is the
merge of the two commands' runs beside it, the compare report is what `ops bench --compare` writes from
them, and the benchmark table and times to RUNNING of the folder's README say what they say."""

from __future__ import annotations

import re

import pytest

from serving_lab.bench import report, results

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-11-30-h200x2-bench"
RUNS = {"pd": ("run-pd-3.json", "run-pd-4.json"), "colocated": ("run-colocated-2.json", "run-colocated-3.json")}
CONSOLES = {
    "pd": ("console-pd-3.log", "console-pd-4.log"),
    "colocated": ("console-colocated-2.log", "console-colocated-3.log"),
}
PROFILES = {"chat 256/256": "chat", "long 3500/200": "long-prompt"}
MODES = {"PD": "pd", "colocated": "colocated"}


def _readme_section() -> str:
    text = (EVIDENCE / "README.md").read_text()
    return text[text.index("**Benchmark, 2026-11-30: an H200 pair") :]


def _readme_rows() -> dict[tuple[str, int, str], list[str]]:
    """(profile, streams, mode) -> [TTFT, ITL, E2E, output tok/s, requests] cells of the README's table."""
    rows = {}
    for line in _readme_section().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0] in PROFILES:
            rows[(PROFILES[cells[0]], int(cells[1]), MODES[cells[2]])] = cells[3:]
    return rows


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_each_mode_was_measured_on_the_h200_pair_at_1_16_64_streams_in_both_profiles(mode):
    run = results.load(EVIDENCE / f"{mode}.json")
    assert (run.stage, run.mode, run.hardware.gpu, run.hardware.gpus_per_node) == ("dev", mode, "NVIDIA H200", 2)
    assert "dummy weights" in run.note and "not EFA" in run.note
    assert {p.name: [level.concurrency for level in p.levels] for p in run.profiles} == {
        "long-prompt": [1, 16, 64],
        "chat": [1, 16, 64],
    }
    assert "skipped" not in run.settings
    assert all(level.errors == 0 for p in run.profiles for level in p.levels)


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_each_merged_run_is_the_merge_of_its_two_commands(mode):
    merged = results.merge([results.load(EVIDENCE / name) for name in RUNS[mode]])
    assert merged.model_dump() == results.load(EVIDENCE / f"{mode}.json").model_dump()


def test_the_committed_compare_report_is_what_ops_bench_writes_from_the_merged_runs(tmp_path):
    written = report.compare(results.load(EVIDENCE / "pd.json"), results.load(EVIDENCE / "colocated.json"), tmp_path)
    assert written.read_text() == (EVIDENCE / "compare" / "report.md").read_text()


def test_the_readme_table_has_every_level_of_both_modes():
    assert len(_readme_rows()) == 2 * 2 * 3


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_the_readme_rows_are_the_runs_numbers(mode):
    rows = _readme_rows()
    for profile in results.load(EVIDENCE / f"{mode}.json").profiles:
        for level in profile.levels:
            ttft, itl, e2e, throughput, requests = rows[(profile.name, level.concurrency, mode)]
            assert ttft == f"{level.ttft_ms.p50:.0f} / {level.ttft_ms.p99:.0f}"
            assert itl == f"{level.itl_ms.p50:.1f} / {level.itl_ms.p99:.1f}"
            assert e2e == f"{level.e2e_ms.p50 / 1000:.2f}"
            assert throughput == f"{level.output_tokens_per_s:.0f}"
            assert requests == str(level.requests)


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_the_readme_times_to_running_are_the_consoles(mode):
    seconds = [
        re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", (EVIDENCE / name).read_text()).group(1)
        for name in CONSOLES[mode]
    ]
    label = next(label for label, name in MODES.items() if name == mode)
    assert f"{label} {seconds[0]} s and {seconds[1]} s" in " ".join(_readme_section().split())


def test_the_readme_plot_is_a_committed_png():
    link = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", _readme_section()).group(1)
    assert (EVIDENCE / link).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
