"""The GPU evidence of evidence/2026-12-02-h200-tutorial-emulated/: the README's figures are the committed
run's own (its console, its KV profile log and its per-request records as they came back from the host)."""

from __future__ import annotations

import re
import tarfile

import pytest

from serving_lab.bench import goodput, intervals

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-02-h200-tutorial-emulated"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"
CONSOLE = (RUNS / "tut-l4.log").read_text()
OBJECTIVES = goodput.Objectives.of_seconds(2.0, 0.1)
LEVEL_LINE = re.compile(r"concurrency (\d+): \d+ requests \.\.\.\n  TTFT p50 ([\d.]+) ms, ITL p50 ([\d.]+) ms")


def _profile_log() -> str:
    with tarfile.open(RUNS / "tut-l4.tgz") as tar:
        member = tar.extractfile("./dev/kv-profile-pd-prefill_config.log")
        assert member is not None
        return member.read().decode()


def _row(streams: int) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {streams} | ")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_fit_figure_is_the_one_the_engine_alone_found_and_the_plan_used():
    assert "prefill_config: 207,569,499 bytes (vLLM's fit figure)" in CONSOLE
    assert "kv_cache_memory_bytes: None -> 207569499" in CONSOLE
    assert "GPU KV cache size: 7,819 tokens" in _profile_log()
    assert "vLLM's fit figure 207,569,499 bytes" in README and "7,819 KV tokens" in README


def test_the_engines_kv_cache_the_checks_and_running_are_the_consoles():
    assert CONSOLE.count("KV cache 0.19 GiB (fixed), 4,096 tokens, 1x requests of 4,096 tokens") == 2
    assert "OK: 10 passed, 0 failed, 1 warnings, 0 skipped" in CONSOLE and "**10 passed, 0 failed**" in README
    found = re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", CONSOLE)
    assert found is not None and f"RUNNING {found[1]} s from ray start" in README


@pytest.mark.parametrize("streams", [1, 4])
def test_each_benchmark_row_is_the_console_and_the_records(streams):
    ttft, itl = {int(m[1]): (m[2], m[3]) for m in LEVEL_LINE.finditer(CONSOLE)}[streams]
    name = f"chat-c{streams}"
    found = intervals.figures(name, intervals.levels(RUNS / "tut-l4-records.tgz")[name], OBJECTIVES).interval
    assert found is not None
    row = _row(streams)
    assert row[1:3] == [f"{ttft} ms", f"{itl} ms"]
    assert row[3].startswith(f"{found.per_s:.2f}/s ({found.low:.2f}-{found.high:.2f}, ")
