"""The GPU evidence of evidence/2026-12-04-h200-oracle/: the verdicts and byte counts its README states are
what the committed code makes of the answers as they came back (the runs' archives)."""

from __future__ import annotations

import json

import pytest

from serving_lab.rehearse import oracle, oracle_run
from serving_lab.rehearse.kv_accounting import Layout

from ...helpers import ROOT
from .archives import answers, archived

EVIDENCE = ROOT / "evidence" / "2026-12-04-h200-oracle"
RUNS = EVIDENCE / "runs"
README = (EVIDENCE / "README.md").read_text()
LAYOUT = Layout.from_config(json.loads((ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json").read_text()))


def _archived(run: str, name: str) -> dict:
    return archived(RUNS / f"{run}.tgz", name)


def _levels(run: str, mode: str) -> oracle.Levels:
    return answers(RUNS / f"{run}.tgz", mode)


COLOCATED = _levels("colocated", "colocated")


@pytest.mark.parametrize(
    ("run", "ok", "identical", "within"), [("pd", True, 1, 21), ("shm", True, 0, 22), ("control", False, 0, 0)]
)
def test_pd_against_colocated_is_the_readmes_verdict(run, ok, identical, within):
    found = oracle.compare(_levels(run, "pd"), COLOCATED)
    assert (found.ok, found.identical, sum(d.within_noise for d in found.divergences)) == (ok, identical, within)


def test_the_negative_control_chose_tokens_outside_the_candidates_at_the_first_token():
    found = oracle.compare(_levels("control", "pd"), COLOCATED)
    assert {(d.position, d.regret) for d in found.divergences} == {(0, None)} and len(found.errors) == 8


def test_the_colocated_engine_against_itself_is_the_noise_the_readme_states():
    floor = oracle_run.noise_floor(COLOCATED)
    assert (floor["identical"], floor["max_logprob_delta"], floor["max_regret"]) == (0, 0.187422, 0.09375)
    assert "logprobs up to 0.187 apart, regret up to 0.094" in README


@pytest.mark.parametrize("run", ["pd", "shm"])
def test_the_bytes_nixl_moved_are_the_layouts_to_the_byte(run):
    answers = _levels(run, "pd")
    accounted = _archived(run, "oracle-accounting-pd.json")["levels"]
    for level, entry in zip(answers.values(), accounted, strict=True):
        tokens = [a.prompt_tokens or 0 for a in level]
        assert all(a.prompt_tokens - a.cached_tokens == 1 for a in level)  # decode computed the last token only
        assert LAYOUT.predicted(tokens, cached_on_decode=0, block_size=528) == entry["moved"][0] == entry["moved"][1]
        assert f"{int(entry['moved'][0]):,}" in README
