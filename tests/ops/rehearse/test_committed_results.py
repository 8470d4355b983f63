"""The GPU results committed under docs/rehearsal/ load as benchmark runs, and the README's benchmark
table says what they say: each PD row from the run's JSON, each colocated row from the p50 line its
console printed (that run's JSON did not come back from the host)."""
from __future__ import annotations

import re

import pytest

from ops.bench import results

from ...helpers import ROOT

EVIDENCE = ROOT / "docs" / "rehearsal" / "2026-11-30-h200x2-pd-colocated"
PROFILES = {"chat 256/256": "chat", "long 3500/200": "long-prompt"}


def _readme_rows() -> dict[tuple[str, int, str], list[str]]:
    """(profile, streams, mode) -> [TTFT, ITL, E2E, output tok/s] cells of the README's benchmark table."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("**Benchmark, 2026-11-30: an H200 pair"):text.index("Incomplete, and said so")]
    rows = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[0] in PROFILES:
            rows[(PROFILES[cells[0]], int(cells[1]), cells[2])] = cells[3:]
    return rows


def _console_p50s(path) -> dict[tuple[str, int], tuple[float, float, float, float]]:
    found, profile, streams = {}, None, None
    for line in path.read_text().splitlines():
        level = re.match(r"(\S+) \(\d+ in / \d+ out\) concurrency (\d+):", line)
        if level:
            profile, streams = level.group(1), int(level.group(2))
        p50 = re.match(r"\s+TTFT p50 ([\d.]+) ms, ITL p50 ([\d.]+) ms, E2E p50 (\d+) ms, (\d+) output tok/s", line)
        if p50:
            found[(profile, streams)] = tuple(float(value) for value in p50.groups())
    return found


def test_the_pd_run_loads_as_a_benchmark_run_of_the_dev_stage_on_two_h200s():
    run = results.load(EVIDENCE / "run-pd.json")
    assert (run.stage, run.mode, run.hardware.gpu, run.hardware.gpus_per_node) == ("dev", "pd", "NVIDIA H200", 2)
    assert "dummy weights" in run.note and "not EFA" in run.note
    assert [(p.name, [level.concurrency for level in p.levels]) for p in run.profiles] == [("chat", [1, 16])]
    assert run.settings["skipped"] == ["chat-c64", "long-prompt-c1", "long-prompt-c16", "long-prompt-c64"]


def test_the_readme_pd_rows_are_the_runs_numbers():
    rows = _readme_rows()
    run = results.load(EVIDENCE / "run-pd.json")
    for profile in run.profiles:
        for level in profile.levels:
            ttft, itl, e2e, throughput = rows[(profile.name, level.concurrency, "PD")]
            assert ttft == f"{level.ttft_ms.p50:.0f} / {level.ttft_ms.p99:.0f}"
            assert itl == f"{level.itl_ms.p50:.1f} / {level.itl_ms.p99:.1f}"
            assert e2e == f"{level.e2e_ms.p50 / 1000:.2f}"
            assert throughput == f"{level.output_tokens_per_s:.0f}"


@pytest.mark.parametrize("profile,streams", [("chat", 1), ("chat", 16), ("chat", 64), ("long-prompt", 1),
                                             ("long-prompt", 16), ("long-prompt", 64)])
def test_the_readme_colocated_rows_are_the_consoles_p50s(profile, streams):
    ttft, itl, e2e, throughput = _console_p50s(EVIDENCE / "console-colocated-1.log")[(profile, streams)]
    row = _readme_rows()[(profile, streams, "colocated")]
    assert row[0] == f"{ttft:.0f} / -" and row[1] == f"{itl:.1f} / -"  # p50 / p99 (lost with the archive)
    assert float(row[2]) == pytest.approx(e2e / 1000, abs=0.05)
    assert float(row[3]) == throughput
