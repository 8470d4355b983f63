"""The oracle's byte accounting: the layout's prediction from config.json, the decode engine's token sources, and
every way a round's KV cache can fail to have moved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serving_lab.rehearse import kv_accounting
from serving_lab.rehearse.kv_accounting import Layout, Round

CONFIG = json.loads((Path(__file__).parents[3] / "serving_lab" / "pins" / "qwen3.5-9b-config.json").read_text())


def test_qwen35_9b_layout_from_its_config():
    layout = Layout.from_config(CONFIG)
    # 8 full-attention layers x K and V x 4 KV heads x 256 x 2 bytes; 24 Gated DeltaNet layers x (conv state
    # 8,192 x 3 x 2 bytes + SSM state 32 x 128 x 128 x 4 bytes)
    assert (layout.full_attention_layers, layout.state_layers) == (8, 24)
    assert layout.fa_bytes_per_token == 8 * 2 * 4 * 256 * 2 == 32_768
    assert layout.state_bytes == 24 * (8192 * 3 * 2 + 32 * 128 * 128 * 4) == 51_511_296


def test_the_prediction_is_a_range_of_whole_blocks():
    layout = Layout.from_config(CONFIG)
    low, high = layout.predicted(external_tokens=749, requests=1, block_size=528)
    assert low == 749 * 32_768 + 51_511_296 and high == low + 527 * 32_768


def _metrics(local_compute, hit, external, prefill_compute=749):
    line = 'ray_vllm_prompt_tokens_by_source_total{{engine="{e}",model_name="m",source="{s}"}} {v}'
    rows = [
        line.format(e=0, s=s, v=v)
        for s, v in (("local_compute", prefill_compute), ("local_cache_hit", 0), ("external_kv_transfer", 0))
    ]
    rows += [
        line.format(e=1, s=s, v=v)
        for s, v in (("local_compute", local_compute), ("local_cache_hit", hit), ("external_kv_transfer", external))
    ]
    return "# TYPE ray_vllm_prompt_tokens_by_source_total counter\n" + "\n".join(rows) + "\n"


def _round(after, *, transfers=1, buckets=None, exporter=("", "")) -> Round:
    return Round(1, [750], _metrics(0, 0, 0, 0), after, transfers, buckets, *exporter)


def _exporter(rx: int) -> str:
    return f'agent_rx_bytes_total{{hostname="h",agent_name="a"}} {rx}\nagent_xfer_time_total{{agent_name="a"}} 9\n'


EXACT = 749 * 32_768 + 51_511_296


def test_a_round_whose_kv_moved_as_predicted_passes():
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(EXACT))), Layout.from_config(CONFIG), 528
    )
    assert found.ok, found.problems
    assert found.moved == (EXACT, EXACT) and found.moved_source.startswith("NIXL exporter")
    assert found.decode == {"local_compute": 1, "local_cache_hit": 0, "external_kv_transfer": 749}


def test_a_decode_engine_that_computed_the_prompt_fails():
    found = kv_accounting.account(_round(_metrics(750, 0, 0)), Layout.from_config(CONFIG), 528)
    assert any("took prompt tokens over NIXL" in p for p in found.problems)


def test_recomputing_more_than_the_last_token_fails():
    found = kv_accounting.account(
        _round(_metrics(5, 0, 745), exporter=(_exporter(0), _exporter(745 * 32_768 + 51_511_296))),
        Layout.from_config(CONFIG),
        528,
    )
    assert any("computed 5 prompt tokens itself for 1 requests" in p for p in found.problems)


def test_bytes_moved_short_of_the_layout_fail_even_when_the_tokens_agree():
    short = EXACT - 2_146_304  # one Gated DeltaNet layer's state left behind
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(short))), Layout.from_config(CONFIG), 528
    )
    assert any("the layout predicts" in p for p in found.problems)


def test_without_the_exporter_the_histogram_buckets_bound_the_bytes():
    layout = Layout.from_config(CONFIG)
    inside = kv_accounting.account(_round(_metrics(1, 0, 749), buckets={"3.35544e+07-1.34218e+08": 1}), layout, 528)
    assert inside.ok and inside.moved_source == "vLLM nixl_bytes_transferred buckets"
    below = kv_accounting.account(_round(_metrics(1, 0, 749), buckets={"2.09715e+06-8.38861e+06": 1}), layout, 528)
    assert not below.ok


def test_fewer_transfers_than_requests_fail():
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), transfers=0, buckets={"3.35544e+07-1.34218e+08": 1}),
        Layout.from_config(CONFIG),
        528,
    )
    assert "0 NIXL transfers for 1 requests" in found.problems


def test_no_block_size_and_no_bytes_are_each_a_problem():
    found = kv_accounting.account(_round(_metrics(1, 0, 749), transfers=None), Layout.from_config(CONFIG), None)
    assert any("no attention block size" in p for p in found.problems)
    assert any("no NIXL bytes measured" in p for p in found.problems)


def test_the_block_size_is_read_from_the_engines_log_line():
    logs = {"a.out": "x\n(EngineCore) INFO [config.py] Setting attention block size to 528 tokens to ensure ...\n"}
    assert kv_accounting.block_size(logs) == 528 and kv_accounting.block_size({"b": "nothing"}) is None


@pytest.mark.parametrize("suffix", ["", "_total"])
def test_token_sources_are_read_per_engine_with_or_without_total(suffix):
    text = f'vllm:prompt_tokens_by_source{suffix}{{engine="1",source="external_kv_transfer"}} 7\n'
    (counts,) = kv_accounting.tokens_by_source(text).values()
    assert counts == {"external_kv_transfer": 7.0}
