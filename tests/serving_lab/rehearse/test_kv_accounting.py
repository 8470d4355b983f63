"""The oracle's byte accounting: the layout's prediction from config.json, the decode engine's token sources, and
every way a round's KV cache can fail to have moved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from serving_lab.rehearse import kv_accounting
from serving_lab.rehearse.kv_accounting import Layout, Round, Transfer

CONFIG = json.loads((Path(__file__).parents[3] / "serving_lab" / "pins" / "qwen3.5-9b-config.json").read_text())
LAYOUT = Layout.from_config(CONFIG)
BLOCK = 528  # what vLLM 0.26 logged for Qwen3.5-9B on an H200 (evidence/2026-12-04-h200-oracle)


def test_qwen35_9b_layout_from_its_config():
    # 8 full-attention layers x K and V x 4 KV heads x 256 x 2 bytes; 24 Gated DeltaNet layers x (conv state
    # 8,192 x 3 x 2 bytes + SSM state 32 x 128 x 128 x 4 bytes)
    assert (LAYOUT.full_attention_layers, LAYOUT.state_layers) == (8, 24)
    assert LAYOUT.fa_bytes_per_token == 8 * 2 * 4 * 256 * 2 == 32_768
    assert LAYOUT.state_bytes == 24 * (8192 * 3 * 2 + 32 * 128 * 128 * 4) == 51_511_296


def test_a_request_moves_whole_blocks_of_all_but_its_last_token_and_its_state():
    assert LAYOUT.request_bytes(529, BLOCK) == 1 * BLOCK * 32_768 + 51_511_296  # 528 tokens: one block
    assert LAYOUT.request_bytes(530, BLOCK) == 2 * BLOCK * 32_768 + 51_511_296
    assert LAYOUT.request_bytes(1, BLOCK) == 51_511_296


def test_the_h200_runs_bytes_are_the_layouts_to_the_byte():
    # the oracle's six prompts at one in flight moved 672,399,360 bytes (NIXL's exporter, 2026-12-04)
    prompts = [19, 1974, 1974, 1974, 3311, 268]
    assert LAYOUT.predicted(prompts, cached_on_decode=0, block_size=BLOCK) == 672_399_360


def test_blocks_the_decode_engine_holds_are_not_moved():
    whole = LAYOUT.predicted([1974], cached_on_decode=0, block_size=BLOCK)
    assert LAYOUT.predicted([1974], cached_on_decode=2 * BLOCK, block_size=BLOCK) == whole - 2 * BLOCK * 32_768


def _metrics(local_compute, hit, external):
    line = 'ray_vllm_prompt_tokens_by_source_total{{engine="{e}",model_name="m",source="{s}"}} {v}'
    rows = [line.format(e=0, s=s, v=v) for s, v in (("local_compute", 749), ("local_cache_hit", 0))]
    rows += [
        line.format(e=1, s=s, v=v)
        for s, v in (("local_compute", local_compute), ("local_cache_hit", hit), ("external_kv_transfer", external))
    ]
    return "\n".join(rows) + "\n"


ZERO = _metrics(0, 0, 0).replace(" 749", " 0")
EXACT = LAYOUT.request_bytes(750, BLOCK)


def _exporter(rx: float, us: float = 0.0, requests: int | None = None) -> str:
    return (
        f'agent_rx_bytes_total{{hostname="h",agent_name="a"}} {rx}\nagent_xfer_time_total{{agent_name="a"}} {us}\n'
        f'agent_rx_requests_num_total{{agent_name="a"}} {(1 if rx else 0) if requests is None else requests}\n'
    )


def _round(after, *, cached=749, exporter=("", ""), measured=()) -> Round:
    return Round(
        concurrency=1,
        prompt_tokens=[750],
        cached_tokens=[cached],
        metrics_before=ZERO,
        metrics_after=after,
        exporter_before=exporter[0],
        exporter_after=exporter[1],
        transfers=list(measured),
    )


def test_a_round_whose_kv_moved_as_predicted_passes_with_its_rate():
    measured = [Transfer("p", 750, EXACT, 0.01)]
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(EXACT)), measured=measured), LAYOUT, BLOCK
    )
    assert found.ok, found.problems
    assert (found.moved, found.transfers, found.predicted) == (EXACT, 1, EXACT)
    assert found.rate_gbps == {"median": round(EXACT * 8 / 0.01 / 1e9, 3), "worst": round(EXACT * 8 / 0.01 / 1e9, 3)}


def test_a_decode_engine_that_computed_the_prompt_fails():
    found = kv_accounting.account(_round(_metrics(750, 0, 0), cached=0), LAYOUT, BLOCK)
    assert any("computed 750 of 750 prompt tokens itself" in p for p in found.problems)
    assert any("0 engines counted prompt tokens over NIXL" in p for p in found.problems)


def test_token_counters_without_bytes_fail():
    # the negative control's handshake was refused: vLLM still counted the tokens as external, NIXL moved nothing
    found = kv_accounting.account(_round(_metrics(1, 0, 749), exporter=(_exporter(5), _exporter(5))), LAYOUT, BLOCK)
    assert any(p.startswith("moved 0 bytes") for p in found.problems)


def test_one_state_layer_left_behind_fails_at_the_level_and_per_request():
    short = EXACT - 2_146_304  # one Gated DeltaNet layer's conv and SSM state
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(short)), measured=[Transfer("p", 750, short, 1)]),
        LAYOUT,
        BLOCK,
    )
    assert any("the layout predicts" in p for p in found.problems)
    assert found.per_request[0]["ok"] is False


def test_a_request_whose_blocks_were_cached_on_the_decode_side_passes_per_request():
    cached_one_block = EXACT - BLOCK * 32_768
    found = kv_accounting.account(
        _round(
            _metrics(1, BLOCK, 749 - BLOCK),
            exporter=(_exporter(0), _exporter(cached_one_block)),
            measured=[Transfer("p", 750, cached_one_block, 1)],
        ),
        LAYOUT,
        BLOCK,
    )
    assert found.ok, found.problems


def test_without_the_exporter_no_bytes_are_measured_and_the_round_fails():
    # vLLM's own histogram reaches Ray's metrics only in buckets a factor 4 apart: no stand-in for the exporter
    found = kv_accounting.account(_round(_metrics(1, 0, 749)), LAYOUT, BLOCK)
    assert found.moved is None
    assert any(p.startswith("no NIXL bytes measured: no agent_rx_bytes_total") for p in found.problems)


def test_fewer_transfers_than_requests_fail():
    found = kv_accounting.account(
        _round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(EXACT, requests=0))), LAYOUT, BLOCK
    )
    assert found.problems == ["0 NIXL transfers for 1 requests"]


def test_no_block_size_is_a_problem():
    found = kv_accounting.account(_round(_metrics(1, 0, 749), exporter=(_exporter(0), _exporter(EXACT))), LAYOUT, None)
    assert found.problems == ["no attention block size in the engines' logs: the bytes cannot be predicted"]


def test_the_block_size_is_read_from_the_engines_log_line():
    logs = {"a.out": "x\n(EngineCore) INFO [config.py] Setting attention block size to 528 tokens to ensure ...\n"}
    assert kv_accounting.block_size(logs) == 528 and kv_accounting.block_size({"b": "nothing"}) is None


@pytest.mark.parametrize("suffix", ["", "_total"])
def test_token_sources_are_read_per_engine_with_or_without_total(suffix):
    text = f'vllm:prompt_tokens_by_source{suffix}{{engine="1",source="external_kv_transfer"}} 7\n'
    (counts,) = kv_accounting.tokens_by_source(text).values()
    assert counts == {"external_kv_transfer": 7.0}


def test_a_transfer_is_the_exporters_counters_around_one_request():
    found = kv_accounting.transfer("p", 750, _exporter(100, 2_000), _exporter(100 + EXACT, 12_000))
    assert (found.bytes, found.seconds) == (EXACT, 0.01)
    assert kv_accounting.transfer("p", 750, "", _exporter(1)) is None
