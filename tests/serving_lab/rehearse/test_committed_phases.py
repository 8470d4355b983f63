"""The GPU evidence of evidence/2026-12-05-h200-phases/: the README's phase table and floors are the runs' own
per-request spans, the HAProxy run ran without Serve's proxy, and both PD runs answer as colocated."""

from __future__ import annotations

import statistics

import pytest

from serving_lab.rehearse import oracle

from ...helpers import ROOT
from .archives import answers, archived

EVIDENCE = ROOT / "evidence"
RUNS = EVIDENCE / "2026-12-05-h200-phases" / "runs"
README = (EVIDENCE / "2026-12-05-h200-phases" / "README.md").read_text()
ROWS = {  # the README's phase table: row label -> the per-request figure
    "client TTFT": "client_ttft_s",
    "prefill engine: queue": "prefill_queue_s",
    "prefill engine: prefill": "prefill_compute_s",
    "decode engine: queue, the NIXL pull inside": "decode_queue_s",
    "decode engine: first step": "decode_first_step_s",
    "outside the engines": "outside_engines_s",
    "Serve: the prefill call's handler": "serve.prefill_s",
}
RANGED = {"client_ttft_s", "prefill_compute_s", "outside_engines_s"}


def _rounds(run: str) -> list[dict]:
    return archived(RUNS / f"{run}.tgz", "ttft-phases-pd.json")


def _cell(rows: list[dict], figure: str) -> str:
    values = [row[figure] for row in rows]
    cell = f"{statistics.median(values) * 1000:.1f}"
    return f"{cell} [{min(values) * 1000:.0f}-{max(values) * 1000:.0f}]" if figure in RANGED else cell


def _table_row(label: str) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {label} |")]
    return [cell.strip() for cell in line.strip("|").split("|")[1:]]


@pytest.mark.parametrize("label", ROWS)
def test_the_phase_table_is_the_medians_of_each_requests_spans(label):
    columns = [_rounds("pd")[0], _rounds("hap")[0], _rounds("pd")[1], _rounds("hap")[1]]
    assert _table_row(label) == [_cell(found["per_request"]["rows"], ROWS[label]) for found in columns]


@pytest.mark.parametrize("run", ["pd", "hap"])
def test_every_request_had_both_engines_spans(run):
    for found in _rounds(run):
        assert found["per_request"]["complete"] == len(found["per_request"]["rows"]) == 12


def test_the_floors_are_stated_as_the_run_computed_them():
    one_pd, one_hap = _rounds("pd")[0]["floors"], _rounds("hap")[0]["floors"]
    assert one_pd["prompt_tokens"] == 721 and f"{one_pd['prefill_compute_s'] * 1000:.1f} ms" == "10.2 ms"
    stated = "client TTFT 21.36x (PD) and 18.9x (HAProxy), the prefill 9.64x and 8.87x"
    assert stated in README.replace("\n", " ")
    assert (one_pd["multiples"]["client_ttft_s"], one_hap["multiples"]["client_ttft_s"]) == (21.36, 18.9)
    assert (one_pd["multiples"]["prefill_compute_s"], one_hap["multiples"]["prefill_compute_s"]) == (9.64, 8.87)


def test_the_haproxy_run_replaced_serves_proxy_and_streamed_from_the_decode_server():
    workers = (RUNS / "hap-workers.txt").read_text()
    assert "HAProxy is enabled in ServeController, replacing Serve proxy with HAProxy" in workers
    assert "llm RUNNING: Decode:qwen3_5-9b HEALTHY 1/1, LLMRouter HEALTHY 1/1" in (RUNS / "hap.log").read_text()
    assert all("serve.LLMRouter_s" in row for row in _rounds("hap")[0]["per_request"]["rows"])


@pytest.mark.parametrize("run", ["pd", "hap"])
def test_both_pd_runs_answer_as_colocated_and_as_the_earlier_pd_one_at_a_time(run):
    colocated = answers(EVIDENCE / "2026-12-04-h200-oracle" / "runs" / "colocated.tgz", "colocated")
    found = oracle.compare(answers(RUNS / f"{run}.tgz", "pd"), colocated)
    assert (found.ok, sum(d.within_noise for d in found.divergences)) == (True, 22)
    earlier = answers(EVIDENCE / "2026-12-04-h200-oracle" / "runs" / "pd.tgz", "pd")[1]
    assert [a.token_ids for a in answers(RUNS / f"{run}.tgz", "pd")[1]] == [a.token_ids for a in earlier]
