"""The GPU evidence of evidence/2026-12-01-h200-ab/: the stage as rendered passed its checks on the L4
budget, the side-by-side table is the committed runs' numbers, its goodput ratios are the runs', and goodput.md is
what `ops bench --goodput` counts from the runs and their aiperf records."""

from __future__ import annotations

import re

import pytest

from serving_lab.bench import results

from ...helpers import ROOT
from . import evidence

EVIDENCE = ROOT / "evidence" / "2026-12-01-h200-ab"
README = EVIDENCE / "README.md"
RUNS = {
    "run-ref-text-ab.json": (EVIDENCE / "runs" / "ref-text-ab", "20261201T164649Z-pd"),
    "run-tuned-ab.json": (EVIDENCE / "runs" / "tuned-ab", "20261201T165414Z-pd"),
}
ARMS = {"the tutorial's engine, text only": "run-ref-text-ab.json", "tuned defaults": "run-tuned-ab.json"}


def test_the_stage_as_rendered_passed_every_check_on_the_l4_budget():
    log = (EVIDENCE / "runs" / "ref-rendered-l4.log").read_text()
    assert "label: L4 memory budget on an H200: memory emulated, speed is the H200's" in log
    assert "OK: 8 passed, 0 failed, 1 warnings" in log
    assert re.search(r"\[\s*402 s\] llm RUNNING: Decode:qwen3_5-9b HEALTHY 1/1, OpenAiIngress HEALTHY 1/1", log)
    for role in ("Prefill", "Decode"):
        assert re.search(
            rf"engine memory \({role}:qwen3_5-9b \w+\)\s+PASS\s+weights 17.66 GiB, KV cache 0.19 GiB \(fixed\), "
            r"4,096 tokens, 1x requests of 4,096 tokens",
            log,
        )
    workers = (EVIDENCE / "runs" / "ref-rendered-l4-workers.txt").read_text()
    assert "profiled with 1 image items of the maximum feature size" in workers  # the vision tower was profiled
    for seconds in ("120.02", "116.47"):
        assert f"init engine (profile, create kv cache, warmup model) took {seconds} s" in workers


def test_the_side_by_side_table_is_the_runs_numbers():
    rows = {
        (evidence.strip(row[0]), row[1], int(row[2])): [evidence.strip(c) for c in row[3:]]
        for row in evidence.table_rows(evidence.section(README, 2), 9)
    }
    measured = 0
    for arm, name in ARMS.items():
        for profile in results.load(EVIDENCE / name).profiles:
            for level in profile.levels:
                assert rows[(arm, profile.name, level.concurrency)] == evidence.level_cells(level)
                measured += 1
    assert measured == len(rows) == 8


def test_the_goodput_ratios_are_the_runs():
    ref, tuned = (results.load(EVIDENCE / name) for name in ARMS.values())
    per_s = evidence.goodput_per_s
    text = " ".join(evidence.section(README, 2).split())
    assert f"7.7x at one stream** ({per_s(tuned, 'chat', 1):.3f} against {per_s(ref, 'chat', 1):.4f}" in text
    for streams, shown in ((1, "7.7x"), (4, "6.0x"), (16, "28.9x")):
        assert f"{per_s(tuned, 'chat', streams) / per_s(ref, 'chat', streams):.1f}x" == shown
        assert shown in text
    assert f"best level against best level {per_s(tuned, 'chat', 16) / per_s(ref, 'chat', 4):.1f}x" in text


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_run_says_what_ran_and_what_the_budget_left_out(name):
    run = results.load(EVIDENCE / name)
    evidence.assert_pd_on_one_shared_h200(run)
    assert "memory emulated" not in run.note  # the full H200
    skipped = {"run-ref-text-ab.json": ["long-prompt-c1", "long-prompt-c4", "long-prompt-c16"]}
    assert run.settings["skipped"] == skipped.get(name, ["long-prompt-c16"])


def test_the_committed_goodput_is_what_ops_bench_counts_from_the_records(tmp_path):
    assert evidence.recounted_goodput(EVIDENCE, RUNS, tmp_path) == (EVIDENCE / "goodput.md").read_text()
