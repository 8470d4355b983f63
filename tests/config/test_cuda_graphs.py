"""serving.engine.cuda_graphs: the one CUDA-graph mode a stage may choose (decode_only), rendered into vLLM's
compilation_config, refused where it cannot do what it says; compilation_config itself stays reserved."""

from __future__ import annotations

import pytest

from charts.serve_config import build_serve_config
from config import load_stage_file
from config.schema import Engine

from ..helpers import DELETE
from ..helpers import refusal as _refusal


def test_decode_only_renders_full_decode_graphs_without_compilation_up_to_max_num_seqs():
    kwargs = Engine(enforce_eager=False, cuda_graphs="decode_only", max_num_seqs=32).vllm_kwargs()
    assert kwargs["compilation_config"] == {
        "mode": 0,
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "max_cudagraph_capture_size": 32,
    }
    assert kwargs["enforce_eager"] is False


def test_without_max_num_seqs_vllm_chooses_the_capture_size():
    kwargs = Engine(enforce_eager=False, cuda_graphs="decode_only").vllm_kwargs()
    assert kwargs["compilation_config"] == {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}


def test_unset_renders_no_compilation_config():
    assert "compilation_config" not in Engine(enforce_eager=False).vllm_kwargs()


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_committed_stages_compile_and_graph_prefills_with_a_fixed_kv_cache(stage):
    # vLLM's own compile and graphs, captured up to 512 tokens, and the KV cache fitted once the compile cache was
    # warm (evidence/2026-12-05-h100-compiled-graphs): no decode_only, whose compilation_config would undo both
    cfg = load_stage_file(f"config/{stage}.yaml")
    args = build_serve_config(cfg.serving)["applications"][0]["args"]
    for role in ("prefill_config", "decode_config"):
        engine = args[role]["engine_kwargs"]
        assert "compilation_config" not in engine and engine["enforce_eager"] is False
        assert engine["max_cudagraph_capture_size"] == 512 and engine["max_num_seqs"] == 32
        assert engine["kv_cache_memory_bytes"] == 2455861324
        assert engine["language_model_only"] is True


def test_with_enforce_eager_it_is_refused_naming_the_field(tmp_path):
    line = _refusal(tmp_path, {"serving": {"engine": {"enforce_eager": True, "cuda_graphs": "decode_only"}}})
    assert "serving.engine.cuda_graphs: decode_only with enforce_eager: true" in line


def test_a_decode_role_block_is_checked_as_it_runs(tmp_path):
    change = {
        "serving": {"engine": {"cuda_graphs": "decode_only", "extra_args": {"max_cudagraph_capture_size": DELETE}}}
    }
    change["serving"]["decode"] = {"replicas": 1, "engine": {"enforce_eager": True}}
    line = _refusal(tmp_path, change)
    assert "serving.engine.cuda_graphs: decode_only with enforce_eager: true" in line


def test_a_capture_size_in_extra_args_beside_it_is_refused(tmp_path):
    # dev's extra_args capture up to 512 tokens: decode_only's own size (max_num_seqs) would contradict it
    line = _refusal(tmp_path, {"serving": {"engine": {"cuda_graphs": "decode_only"}}})
    assert "serving.engine.cuda_graphs" in line and "extra_args.max_cudagraph_capture_size" in line


@pytest.mark.parametrize("value", ["full", "FULL_DECODE_ONLY", "piecewise", True])
def test_other_modes_are_refused(tmp_path, value):
    line = _refusal(tmp_path, {"serving": {"engine": {"cuda_graphs": value}}})
    assert "serving.engine.cuda_graphs" in line


def test_compilation_config_stays_reserved_in_extra_args(tmp_path):
    line = _refusal(tmp_path, {"serving": {"engine": {"extra_args": {"compilation_config": "{}"}}}})
    assert "compilation_config" in line and "reserved" in line
