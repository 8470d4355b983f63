"""The GPU evidence of evidence/2026-12-01-h200-l4-emulated/: its README's KV table is vLLM's own lines in
the committed logs, its benchmark tables are the committed runs' numbers, its goodput.md is what `ops bench
--goodput` writes from the runs and their aiperf records, and the runs are labelled with what they were."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from serving_lab.bench import results

from ...helpers import ROOT
from . import evidence

EVIDENCE = ROOT / "evidence" / "2026-12-01-h200-l4-emulated"
EARLIER = ROOT / "evidence" / "2026-12-01-h200-tuned"
# README arm -> the log with vLLM's lines for one engine alone on the L4 budget
PROFILE_LOGS = {
    "the tutorial's engine as rendered": EVIDENCE / "runs" / "profile-rendered.log",
    "tuned defaults": EARLIER / "runs" / "profile-graphs-text.log",
    "online FP8 + the tuned graph mode": EVIDENCE / "runs" / "profile-fp8-graphs-text.log",
}
# run file -> (the rehearsal's results as they came back, the run's file name inside them): NAME.tgz holds aiperf's
# summaries, NAME-records.tgz its per-request records (serving_lab/scripts/rehearsal_device_run.sh)
RUNS = {
    "run-ref-text-pd.json": (EARLIER / "runs" / "ref-text-pd", "20261201T122611Z-pd"),
    "run-tuned-dev-pd.json": (EVIDENCE / "runs" / "tuned-dev-pd", "20261201T141205Z-pd"),
    "run-tuned-dev-l4.json": (EVIDENCE / "runs" / "tuned-dev-l4", "20261201T141941Z-pd"),
}
ARMS = {
    "the tutorial's engine, text only": "run-ref-text-pd.json",
    "**tuned defaults**": "run-tuned-dev-pd.json",
}


def _readme() -> str:
    return (EVIDENCE / "README.md").read_text()


def _section(number: int) -> str:
    return evidence.section(EVIDENCE / "README.md", number)


def _vllm(log: Path) -> dict[str, str]:
    text = log.read_text()

    def one(pattern: str) -> str:
        found = re.search(pattern, text)
        assert found is not None, f"{log.name}: no line matching {pattern!r}"
        return found.group(1)

    return {
        "weights": one(r"Model loading took ([0-9.]+) GiB"),
        "peak": one(r"([0-9.]+) GiB for peak activation"),
        "kv": one(r"Available KV cache memory: ([0-9.]+) GiB"),
        "tokens": one(r"GPU KV cache size: ([0-9,]+) tokens"),
        "concurrency": one(r"Maximum concurrency for 4,096 tokens per request: ([0-9.]+)x"),
        "fit": one(r"--kv-cache-memory=([0-9]+)` \([0-9.]+ GiB\) to fit into requested memory"),
        "budget": one(r"Desired GPU memory utilization is \(([0-9.]+),"),
    }


def test_every_profile_ran_on_the_l4_budget_of_an_h200():
    for log in PROFILE_LOGS.values():
        assert _vllm(log)["budget"] == "0.1441"


@pytest.mark.parametrize("arm", sorted(PROFILE_LOGS))
def test_the_kv_table_is_vllms_own_lines(arm):
    rows = {evidence.strip(row[0]).split(" (")[0]: row for row in evidence.table_rows(_section(1), 8)}
    weights, peak, kv, tokens, requests, fit = (evidence.strip(cell) for cell in rows[arm][1:7])
    seen = _vllm(PROFILE_LOGS[arm])
    assert (weights, peak, kv, tokens) == (
        f"{seen['weights']} GiB",
        f"{seen['peak']} GiB",
        f"{seen['kv']} GiB",
        seen["tokens"],
    )
    assert float(requests) == pytest.approx(float(seen["concurrency"]), abs=0.01)
    assert fit.startswith(f"{int(seen['fit']):,} B")


def test_the_ratios_are_the_tables_tokens():
    tokens = {arm: int(_vllm(log)["tokens"].replace(",", "")) for arm, log in PROFILE_LOGS.items()}
    rendered = tokens["the tutorial's engine as rendered"]
    text = " ".join(_section(1).split())
    assert f"Tuned BF16: {tokens['tuned defaults'] / rendered:.2f}x" in text
    assert f"FP8: {tokens['online FP8 + the tuned graph mode'] / rendered:.1f}x" in text


def test_the_emulated_benchmark_table_is_the_runs_numbers():
    rows = {
        (row[0], int(row[1])): [evidence.strip(cell) for cell in row[2:]] for row in evidence.table_rows(_section(2), 8)
    }
    run = results.load(EVIDENCE / "run-tuned-dev-l4.json")
    levels = [(p.name, level) for p in run.profiles for level in p.levels]
    assert len(rows) == len(levels) == 4
    for profile, level in levels:
        assert rows[(profile, level.concurrency)] == evidence.level_cells(level)


def test_the_full_h200_table_is_the_runs_numbers():
    rows = {
        (evidence.strip(row[0]), row[1], int(row[2])): [evidence.strip(c) for c in row[3:]]
        for row in evidence.table_rows(_section(3), 9)
    }
    measured = 0
    for arm, name in ARMS.items():
        for profile in results.load(EVIDENCE / name).profiles:
            for level in profile.levels:
                assert rows[(evidence.strip(arm), profile.name, level.concurrency)] == evidence.level_cells(level)
                measured += 1
    assert measured == len(rows) == 7


def test_the_goodput_ratios_are_the_runs():
    ref, tuned = (results.load(EVIDENCE / name) for name in ARMS.values())
    per_s = evidence.goodput_per_s
    text = " ".join(_section(3).split())
    assert f"Goodput: {per_s(tuned, 'chat', 1) / per_s(ref, 'chat', 1):.1f}x at one stream" in text
    assert f"{per_s(tuned, 'chat', 16) / per_s(ref, 'chat', 16):.1f}x at 16" in text
    assert f"{per_s(tuned, 'chat', 4) / per_s(ref, 'chat', 1):.1f}x" in text


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_run_says_what_ran(name):
    run = results.load(EVIDENCE / name)
    evidence.assert_pd_on_one_shared_h200(run)
    emulated = "L4 memory budget on an H200: memory emulated, speed is the H200's"
    assert (emulated in run.note) == (name == "run-tuned-dev-l4.json")


def test_the_committed_goodput_is_what_ops_bench_counts_from_the_records(tmp_path):
    assert evidence.recounted_goodput(EVIDENCE, RUNS, tmp_path) == (EVIDENCE / "goodput.md").read_text()


def test_the_emulated_tuned_rehearsal_passed_and_the_rendered_one_came_up():
    tuned = (EVIDENCE / "runs" / "tuned-dev-l4.log").read_text()
    assert "OK: 8 passed, 0 failed, 1 warnings" in tuned
    assert "KV cache 2.63 GiB (fixed), 60,695 tokens, 14.82x requests of 4,096 tokens" in tuned
    rendered = (EVIDENCE / "runs" / "ref-rendered-l4.log").read_text()
    assert re.search(
        r"\[\s*241 s\] llm RUNNING: Decode:qwen3_5-9b HEALTHY 1/1, OpenAiIngress HEALTHY 1/1, Prefill", rendered
    )
    workers = (EVIDENCE / "runs" / "ref-rendered-l4-workers.txt").read_text()
    assert "GPU KV cache size: 4,096 tokens" in workers and "reserved 0.19 GiB memory for KV" in workers


def test_the_scripts_the_readme_runs_are_committed():
    for script in re.findall(r"(evidence/[\w./-]+\.sh)", _readme()):
        assert (ROOT / script).is_file(), script
    assert Path(ROOT / "evidence/2026-12-01-h200-l4-emulated/emulated_pd.sh").stat().st_mode & 0o111
