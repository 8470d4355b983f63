"""The GPU evidence of evidence/2026-12-05-h200-fabric/: the oracle's verdicts, the bytes per request and the
rate check's backend are what the committed code makes of the runs' archives and workers' logs."""

from __future__ import annotations

import json

import pytest

from serving_lab.rehearse import cli, oracle, overrides
from serving_lab.rehearse.host import Gpu, Host
from serving_lab.rehearse.kv_accounting import Layout

from ...helpers import ROOT
from .archives import answers, archived

EVIDENCE = ROOT / "evidence"
RUNS = EVIDENCE / "2026-12-05-h200-fabric" / "runs"
README = (EVIDENCE / "2026-12-05-h200-fabric" / "README.md").read_text()
LAYOUT = Layout.from_config(json.loads((ROOT / "serving_lab" / "pins" / "qwen3.5-9b-config.json").read_text()))
ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())


COLOCATED = answers(EVIDENCE / "2026-12-04-h200-oracle" / "runs" / "colocated.tgz", "colocated")


def test_pd_over_ucx_answers_as_colocated_within_the_noise_bound():
    found = oracle.compare(answers(RUNS / "pd-ucx.tgz", "pd"), COLOCATED)
    assert (found.ok, found.identical, sum(d.within_noise for d in found.divergences)) == (True, 0, 22)


def test_the_control_whose_kv_crossed_fails_at_every_first_token():
    found = oracle.compare(answers(RUNS / "control.tgz", "pd"), COLOCATED)
    assert not found.ok and not found.errors  # all 22 answered: vLLM did not refuse the handshake
    assert {(d.position, d.regret) for d in found.divergences} == {(0, None)} and len(found.divergences) == 22


def test_the_checkpoint_made_again_on_another_host_gives_the_earlier_pd_answers_one_at_a_time():
    earlier = answers(EVIDENCE / "2026-12-04-h200-oracle" / "runs" / "pd.tgz", "pd")[1]
    today = answers(RUNS / "pd-ucx.tgz", "pd")[1]
    assert [a.token_ids for a in today] == [a.token_ids for a in earlier]


@pytest.mark.parametrize("run", ["pd-ucx", "control"])
def test_every_request_one_at_a_time_moved_the_layouts_bytes(run):
    one_at_a_time = answers(RUNS / f"{run}.tgz", "pd")[1]
    (one, _) = archived(RUNS / f"{run}.tgz", "oracle-accounting-pd.json")["levels"]
    for answer, moved in zip(one_at_a_time, one["per_request"], strict=True):
        assert answer.prompt_tokens - answer.cached_tokens == 1  # decode computed the last token only
        predicted = LAYOUT.predicted([answer.prompt_tokens], cached_on_decode=0, block_size=528)
        assert moved["bytes"] == predicted and f"{moved['bytes']:,}" in README


@pytest.mark.parametrize(
    ("run", "transport", "median"),
    [("pd-ucx", overrides.Transport(), "809.0"), ("lf-tcp", overrides.Transport(nixl_backend="LIBFABRIC"), "13.8")],
)
def test_the_rate_checks_backend_is_the_plans_on_this_host(run, transport, median):
    logs = {"workers": (RUNS / f"{run}-workers.txt").read_text()}
    assert cli.rate_backend(logs, transport, ONE_H200).ok  # the runs' "wrong backend" verdict, fixed after them
    rate = next(c for c in archived(RUNS / f"{run}.tgz", "report-pd.json")["checks"] if c["name"] == "KV transfer rate")
    assert f"{rate['data']['median_gbps']:.1f}" == median and f"| {median} Gbps |" in README
