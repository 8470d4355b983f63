"""The GPU evidence of evidence/2026-12-05-h200-graph-arms/: the README's arms table is the run's own figures, the
breakable arm's graphed prefills computed other logprobs while vLLM's compiled one stayed within the engines' own
noise, and PD with torch.compile answers as 2026-12-04's colocated engine."""

from __future__ import annotations

import math
import statistics
import tarfile

import pytest

from serving_lab.rehearse import engine_memory, graph_arms, oracle

from ...helpers import ROOT
from .archives import answers, archived

EVIDENCE = ROOT / "evidence"
RUNS = EVIDENCE / "2026-12-05-h200-graph-arms" / "runs"
README = (EVIDENCE / "2026-12-05-h200-graph-arms" / "README.md").read_text()


def _arms() -> dict[str, dict]:
    return {row["arm"]: row for row in archived(RUNS / "arms2.tgz", "graph-arms/arms.json")["arms"]}


def _log(arm: str) -> str:
    with tarfile.open(RUNS / "arms2.tgz") as tar:
        member = tar.extractfile(f"./dev/graph-arms/{arm}.log")
        assert member is not None
        return member.read().decode()


def _table_row(label: str) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in line.strip("|").split("|")[1:]]


@pytest.mark.parametrize("arm", ["today", "breakable@512", "vllm-default@512"])
def test_the_tables_kv_tokens_start_and_first_tokens_are_the_runs_own(arm):
    row, cells = _arms()[arm], _table_row(arm)
    medians = row["medians"]
    assert cells[0] == f"{row['vllm']['kv_cache_tokens']:,}" and cells[2] == f"{row['start_seconds']:.1f} s"
    assert cells[3].startswith(f"{medians['first_token_256'] * 1000:.1f} ms")
    assert cells[4].startswith(f"{medians['first_token_3500'] * 1000:.1f} ms")
    assert cells[5] == f"{medians['first_token_16x256'] * 1000:.1f} ms"


def test_every_prefill_the_breakable_arm_graphed_shares_no_top_token_with_todays():
    arms = _arms()
    mine, today = arms["breakable@512"]["first_tokens"], arms["today"]["first_tokens"]
    gaps = dict(zip(mine["lengths"], map(graph_arms.logprob_gap, mine["singly"], today["singly"]), strict=True))
    assert gaps == {61: math.inf, 97: math.inf, 130: math.inf, 170: math.inf, 270: math.inf, 600: 0.0}


def test_the_compiled_arm_is_within_the_noise_either_engine_shows_against_itself_batched():
    arms = _arms()
    across, within = graph_arms.first_token_gaps(arms["vllm-default@512"], arms["today"])
    _, todays_own = graph_arms.first_token_gaps(arms["today"], arms["today"])
    assert (round(across, 3), round(within, 3), round(todays_own, 3)) == (0.156, 0.125, 0.093)
    assert "0.094-0.156 (its own batch: 0.125)" in README and "0 (its own batch: 0.093)" in README


def test_torch_compiles_profiling_peak_is_what_leaves_the_l4_budget_its_small_kv_cache():
    peak = {arm: _log(arm).split("GiB for peak activation")[0].rsplit(" ", 2)[-2] for arm in _arms()}
    assert peak == {"today": "0.25", "breakable@512": "0.25", "vllm-default@512": "1.98"}
    assert engine_memory.figures(_log("vllm-default@512"))["compile_seconds"] == 22.33


def test_pd_with_torch_compile_answers_as_the_colocated_engine_of_today():
    colocated = answers(EVIDENCE / "2026-12-04-h200-oracle" / "runs" / "colocated.tgz", "colocated")
    found = oracle.compare(answers(RUNS / "pd-vd512.tgz", "pd"), colocated)
    assert (found.ok, len(found.divergences), sum(d.within_noise for d in found.divergences)) == (True, 22, 22)


@pytest.mark.parametrize(
    ("label", "figure"),
    [
        ("client TTFT", "client_ttft_s"),
        ("prefill engine: prefill", "prefill_compute_s"),
        ("decode engine: queue (the NIXL pull inside)", "decode_queue_s"),
        ("decode engine: first step", "decode_first_step_s"),
        ("outside the engines", "outside_engines_s"),
    ],
)
def test_the_phase_table_is_the_medians_the_run_recorded_of_each_requests_spans(label, figure):
    rounds = archived(RUNS / "pd-vd512.tgz", "ttft-phases-pd.json")
    for found in rounds:  # the run's medians (rounded to 10 us) are those of its per-request rows
        rows = found["per_request"]["rows"]
        assert found["per_request"]["medians"][figure] == round(statistics.median(r[figure] for r in rows), 5)
    medians = [found["per_request"]["medians"][figure] for found in rounds]
    assert [cell.split(" ")[0] for cell in _table_row(label)] == [f"{value * 1000:.1f}" for value in medians]
