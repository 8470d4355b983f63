"""Engine arguments by what they mean (issue #34, items 1 and 6), each class fixed by a rule rather than by examples:
what decides the loaded weights or the KV layout (IDENTITY_ARGS: pinned revisions, one value for both PD roles), and
every other accepted tuning argument with the check it gets (ENGINE_ARG_CHECKS): turned-off parts of the stack and
uncountable memory refused, counted memory fed into the fit, pod and alarm rules, parallel sizes against TP and the
model's heads. Every refusal is one line naming the stage file and the field."""

from __future__ import annotations

import json
import re

import pytest

from config import engine_args
from config.engine_arg_classes import (
    COUNTED_ARGS,
    ENGINE_ARG_CHECKS,
    ENGINE_ARGS_ALLOWED,
    ENGINE_ARGS_OPT_IN,
    ENGINE_ARGS_RESERVED,
    FREE_TUNING,
    IDENTITY_ARGS,
    PINNED_REVISIONS,
)
from config.rules.serving_engine_tuning import MODEL_HEADS
from config.schema import Engine

from ..helpers import REHEARSAL, config_with, data_file, merge, stage_data, write_stage
from ..helpers import refusal as _refusal
from .test_workload_rules import FOUR_L4, P5

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"


def _extra(**args) -> dict:
    return {"serving": {"engine": {"extra_args": args}}}


def _role(role: str, **engine) -> dict:
    return {"serving": {role: {"replicas": 1, "engine": engine}}}


def _opt_in(*names: str) -> dict:
    return {"serving": {"allow_unsafe_engine_args": list(names)}}


# --- the classes themselves -------------------------------------------------------------------------------------


def test_every_allowed_argument_has_exactly_one_check():
    groups = [set(FREE_TUNING), set(IDENTITY_ARGS), set(COUNTED_ARGS)]
    assert sum(len(g) for g in groups) == len(set().union(*groups))  # disjoint
    assert set(ENGINE_ARG_CHECKS) == set().union(*groups)
    assert ENGINE_ARGS_ALLOWED == set(ENGINE_ARG_CHECKS) - set(ENGINE_ARGS_RESERVED) - set(ENGINE_ARGS_OPT_IN)
    assert not set(FREE_TUNING) & (set(ENGINE_ARGS_RESERVED) | set(ENGINE_ARGS_OPT_IN))


def test_identity_and_counted_arguments_are_real_engine_settings():
    settable = set(engine_args.recorded()) - set(ENGINE_ARGS_RESERVED)
    for name in [*IDENTITY_ARGS, *COUNTED_ARGS]:
        assert name in settable or name in Engine.model_fields, name
    assert set(PINNED_REVISIONS) <= set(IDENTITY_ARGS)


# A name that says memory, a block count, offloading, adapters or a parallel size is counted or refused, never free
# tuning; the exception says why.
SIZES_MEMORY = re.compile(r"memory|_gb$|_bytes$|blocks|offload|lora|parallel_size|tokenizer|log_stats")
NOT_SIZING = {
    "cpu_offload_params": "a set of names, which no stage scalar can set (check_extra refuses it)",
}


def test_no_free_tuning_argument_sizes_memory_or_turns_off_a_part_of_the_stack():
    suspicious = {name for name in FREE_TUNING if SIZES_MEMORY.search(name)}
    assert suspicious == set(NOT_SIZING)
    assert engine_args.check_extra("cpu_offload_params", "x") is not None


# --- item 1: what is loaded -------------------------------------------------------------------------------------

NOT_COMMITS = [
    "refs/pr/1",
    "refs/pr/42",
    "main",
    "refs/heads/main",
    "v1.0",
    "refs/tags/v1.0",
    "0123456",  # a short commit id: git resolves it, and a branch may take its name
    COMMIT[:-1],
    COMMIT + "0",
    " " + COMMIT,
    "",
]


@pytest.mark.parametrize("value", NOT_COMMITS)
@pytest.mark.parametrize("name", ["revision", "tokenizer_revision"])
def test_a_revision_that_is_not_a_commit_id_is_refused(tmp_path, name, value):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args.{name}: " in line
    assert "is not a commit id" in line and "(allowed: a full commit id of 'Qwen/Qwen3.5-9B', 40 lower-case hex" in line


def test_code_revision_is_pinned_too_even_with_its_opt_in(tmp_path):
    change = merge(_extra(code_revision="refs/pr/7"), _opt_in("code_revision"))
    assert ": serving.engine.extra_args.code_revision: 'refs/pr/7' is not a commit id" in _refusal(tmp_path, change)
    cfg = config_with(tmp_path, **merge(_extra(code_revision=COMMIT), _opt_in("code_revision")))
    assert cfg.serving.engine.vllm_kwargs()["code_revision"] == COMMIT


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_a_roles_revision_is_pinned_and_named_on_the_role(tmp_path, role):
    line = _refusal(tmp_path, _role(role, extra_args={"revision": "refs/pr/3"}))
    assert f": serving.{role}.engine.extra_args.revision: 'refs/pr/3' is not a commit id" in line


@pytest.mark.parametrize("name", ["revision", "tokenizer_revision"])
def test_a_commit_id_is_allowed(tmp_path, name):
    assert config_with(tmp_path, **_extra(**{name: COMMIT})).serving.engine.vllm_kwargs()[name] == COMMIT


# A value for every settable identity argument, other than what dev's serving.engine runs (test below: complete).
ROLE_VALUES = {
    "dtype": "float16",
    "revision": COMMIT,
    "code_revision": COMMIT,
    "trust_remote_code": True,
    "tokenizer_revision": COMMIT,
    "tokenizer_mode": "hf",
    "quantization": "fp8",
    "load_format": "safetensors",
    "model_impl": "vllm",
    "language_model_only": False,
    "generation_config": "vllm",
    "kv_cache_dtype": "fp8",
    "calculate_kv_scales": True,
    "kv_sharing_fast_prefill": True,
    "disable_sliding_window": True,
    "disable_hybrid_kv_cache_manager": True,
    "mamba_cache_dtype": "float32",
    "mamba_ssm_cache_dtype": "float32",
    "mamba_block_size": 256,
    "mamba_cache_mode": "align",
}


def test_every_identity_argument_has_a_per_role_case():
    assert set(ROLE_VALUES) == set(IDENTITY_ARGS)


def _one_role_sets(role: str, name: str, value) -> dict:
    key = name if name in Engine.model_fields else f"extra_args.{name}"
    block = {name: value} if "." not in key else {"extra_args": {name: value}}
    change = _role(role, **block)
    return merge(change, _opt_in(name)) if name in ENGINE_ARGS_OPT_IN else change


@pytest.mark.parametrize("role", ["prefill", "decode"])
@pytest.mark.parametrize("name", sorted(ROLE_VALUES))
def test_a_role_that_loads_other_weights_or_another_kv_layout_is_refused(tmp_path, name, role):
    key = name if name in Engine.model_fields else f"extra_args.{name}"
    line = _refusal(tmp_path, _one_role_sets(role, name, ROLE_VALUES[name]))
    assert f": serving.{role}.engine.{key}: prefill runs " in line, line
    assert f"{name} decides {IDENTITY_ARGS[name]}" in line
    assert f"(allowed: one value for both roles, set in serving.engine.{key})" in line


def test_both_roles_naming_other_commits_are_refused_on_prefill(tmp_path):
    change = merge(
        _role("prefill", extra_args={"revision": COMMIT}), _role("decode", extra_args={"revision": OTHER_COMMIT})
    )
    line = _refusal(tmp_path, change)
    assert ": serving.prefill.engine.extra_args.revision: prefill runs '0123456789abcdef" in line
    assert "which NIXL's handshake does not compare" in line


def test_one_identity_for_both_roles_is_allowed_wherever_it_is_set(tmp_path):
    both = merge(_role("prefill", extra_args={"revision": COMMIT}), _role("decode", extra_args={"revision": COMMIT}))
    cfg = config_with(tmp_path, **merge(both, {"serving": {"engine": {"extra_args": {"kv_cache_dtype": "fp8"}}}}))
    for role in ("prefill", "decode"):
        assert cfg.serving.engine_for(role).extra_args["revision"] == COMMIT
        assert cfg.serving.engine_for(role).extra_args["kv_cache_dtype"] == "fp8"
    # tuning that decides neither may differ between the roles
    config_with(tmp_path, **_role("decode", max_num_seqs=8, extra_args={"block_size": 32, "seed": 3}))


def test_the_revision_reaches_both_engines_of_the_serve_config(tmp_path):
    from charts.serve_config import build_serve_config

    cfg = config_with(tmp_path, **_extra(revision=COMMIT))
    text = json.dumps(build_serve_config(cfg.serving))
    assert text.count(f'"revision": "{COMMIT}"') == 2


# --- item 6: tuning checked where it matters ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, why",
    [
        ("disable_log_stats", True, "the TtftP99 alarm and the dashboard read"),
        ("disable_log_stats", False, "the TtftP99 alarm"),  # reserved whatever the value
        ("skip_tokenizer_init", True, "chat and completions endpoints need"),
        ("tokens_only", True, "tokens_only sets it"),
        ("mm_encoder_only", True, "generates no text"),
        ("num_gpu_blocks_override", 100_000, "a fixed KV size is kv_cache_memory_bytes, which is counted"),
        ("skip_mm_profiling", True, "unprofiled vision encoder"),
        ("offload_group_size", 4, "cpu_offload_gb, in GiB, is counted"),
        ("offload_num_in_group", 1, "by a count of layers"),
        ("offload_prefetch_step", 1, "by a count of layers"),
        ("enable_lora", True, "LoRA slots no adapter can fill"),
        ("max_loras", 4, "LoRA slots"),
        ("ignore_patterns", "*.safetensors", "which files of serving.model.source"),
    ],
)
def test_tuning_that_turns_off_the_stack_or_sizes_memory_uncounted_is_refused(tmp_path, name, value, why):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name} is reserved: " in line and why in line, line
    line = _refusal(tmp_path, _role("decode", extra_args={name: value}))
    assert f": serving.decode.engine.extra_args: {name} is reserved: " in line


def test_a_kv_cache_dtype_the_fit_check_cannot_count_is_refused(tmp_path):
    line = _refusal(tmp_path, _extra(kv_cache_dtype="int4_per_token_head"))
    assert ": serving.engine.extra_args: kv_cache_dtype: 'int4_per_token_head' (allowed: 'auto', " in line
    assert "the KV cache dtypes the fit check counts" in line


GIB = 2**30


@pytest.mark.parametrize(
    "change, phrase",
    [
        # dev: Qwen3.5-9B, 17.98 GiB of bf16 weights on a 24 GiB L4
        (_extra(kv_cache_memory_bytes=20 * GIB), "more than a GPU's 24 GiB: a fixed KV cache ignores"),
        (_extra(kv_cache_memory_bytes=1000), "hold less than one 4096-token sequence"),
        (_extra(kv_cache_memory_bytes=5 * GIB), "so the GpuMemory alarm would always fire"),
    ],
)
def test_a_fixed_kv_cache_is_counted_against_the_gpu_one_sequence_and_the_alarm(tmp_path, change, phrase):
    line = _refusal(tmp_path, change)
    assert ": serving.engine.extra_args.kv_cache_memory_bytes: " in line and phrase in line, line


def test_a_fixed_kv_cache_that_fits_is_allowed_and_a_roles_is_named_on_the_role(tmp_path):
    # the L4 budget rehearsal's figure (evidence/2026-12-01-h200-l4-budget, stages-graphs-profiled-kv)
    cfg = config_with(tmp_path, **_extra(kv_cache_memory_bytes=931857499))
    assert cfg.serving.engine.vllm_kwargs()["kv_cache_memory_bytes"] == 931857499
    line = _refusal(tmp_path, _role("decode", extra_args={"kv_cache_memory_bytes": 20 * GIB}))
    assert ": serving.decode.engine.extra_args.kv_cache_memory_bytes: " in line


@pytest.mark.parametrize(
    "args, field",
    [
        ({"cpu_offload_gb": 100}, "cpu_offload_gb"),
        ({"cpu_offload_gb": 30, "mm_processor_cache_gb": 20}, "cpu_offload_gb"),
        ({"mm_processor_cache_gb": 40}, "mm_processor_cache_gb"),
    ],
)
def test_memory_moved_to_the_cpu_is_counted_against_the_worker_pod(tmp_path, args, field):
    line = _refusal(tmp_path, _extra(**args))
    assert f": serving.engine.extra_args.{field}: " in line
    assert "of the Ray worker's memory for one engine, but its limit is 64 GiB" in line
    config_with(tmp_path, **_extra(cpu_offload_gb=8, mm_processor_cache_gb=2))


@pytest.mark.parametrize(
    "change, field, phrase",
    [
        (_extra(decode_context_parallel_size=2), "extra_args.decode_context_parallel_size", "(allowed: 1)"),
        (
            merge(
                FOUR_L4,
                merge({"serving": {"engine": {"tensor_parallel_size": 4}}}, _extra(decode_context_parallel_size=3)),
            ),
            "extra_args.decode_context_parallel_size",
            "(allowed: 1, 2, 4)",
        ),
        # Qwen3.5-9B has 4 KV heads: DCP needs TP above them
        (
            merge(
                FOUR_L4,
                merge({"serving": {"engine": {"tensor_parallel_size": 4}}}, _extra(decode_context_parallel_size=2)),
            ),
            "extra_args.decode_context_parallel_size",
            "needs TP above them",
        ),
        (
            merge(
                P5, merge({"serving": {"engine": {"tensor_parallel_size": 8}}}, _extra(decode_context_parallel_size=4))
            ),
            "extra_args.decode_context_parallel_size",
            "(allowed here: 1, 2;",
        ),
        # 16 attention heads and 4 KV heads: TP 3 splits neither
        (
            merge(FOUR_L4, {"serving": {"engine": {"tensor_parallel_size": 3}}}),
            "tensor_parallel_size",
            "16 attention heads",
        ),
    ],
)
def test_parallel_sizes_are_checked_against_tp_and_the_models_heads(tmp_path, change, field, phrase):
    line = _refusal(tmp_path, change)
    assert f": serving.engine.{field}: " in line and phrase in line, line


def test_a_roles_tp_is_checked_against_the_heads_on_the_role(tmp_path):
    line = _refusal(tmp_path, merge(FOUR_L4, _role("prefill", tensor_parallel_size=3)))
    assert ": serving.prefill.engine.tensor_parallel_size: 3, but 'Qwen/Qwen3.5-9B' has 16 attention heads" in line
    assert "(allowed: 1, 2, 4)" in line  # within the g6.12xlarge's four GPUs


QWEN_27B = {"serving": {"model": {"source": "Qwen/Qwen3.5-27B", "id": "qwen3.5-27b"}}}


def _qwen_27b(tp: int) -> dict:
    return merge(QWEN_27B, {"serving": {"engine": {"tensor_parallel_size": tp}}})


def test_tp_that_splits_the_heads_but_not_the_kv_heads_is_refused(tmp_path):
    # Qwen3.5-27B: 24 attention heads split over 3 ranks, its 4 KV heads do not
    line = _refusal(tmp_path, merge(FOUR_L4, _qwen_27b(3)))
    assert ": serving.engine.tensor_parallel_size: 3, but 'Qwen/Qwen3.5-27B' has 24 attention heads and 4 KV " in line
    assert "(allowed: 1, 2, 4)" in line


def test_tp_a_multiple_of_the_kv_heads_replicates_them_and_is_allowed(tmp_path):
    # TP 8 over 4 KV heads: vLLM keeps two copies of each (QKVParallelLinear num_kv_head_replicas)
    cfg = config_with(tmp_path, **merge(P5, _qwen_27b(8)))
    assert cfg.serving.engine.tensor_parallel_size == 8


def test_a_larger_model_over_a_nodes_four_gpus_validates(tmp_path):
    cfg = config_with(tmp_path, **merge(FOUR_L4, _qwen_27b(4)))
    assert cfg.serving.engine.vllm_kwargs()["tensor_parallel_size"] == 4


def test_dcp_within_the_heads_is_allowed(tmp_path):
    change = merge(
        P5, merge({"serving": {"engine": {"tensor_parallel_size": 8}}}, _extra(decode_context_parallel_size=2))
    )
    cfg = config_with(tmp_path, **change)
    assert cfg.serving.engine.vllm_kwargs()["decode_context_parallel_size"] == 2


@pytest.mark.parametrize("model", ["qwen3.5-9b", "qwen3.5-27b"])
def test_the_head_counts_are_the_committed_config_json(model):
    config = json.loads(data_file(REHEARSAL / f"{model}-config.json").read_text())["text_config"]
    assert MODEL_HEADS[model] == (config["num_attention_heads"], config["num_key_value_heads"])
    from config.derived import KNOWN_MODELS

    assert set(MODEL_HEADS) <= set(KNOWN_MODELS)


def test_validate_exits_non_zero_with_one_line_and_no_traceback(tmp_path):
    import subprocess
    import sys

    from ..helpers import ROOT, clean_env

    (tmp_path / "config").mkdir()
    write_stage(tmp_path / "config", merge(stage_data("dev"), _extra(revision="refs/pr/1")), name="dev")
    result = subprocess.run(
        [sys.executable, "-m", "config", "validate", "config/dev.yaml"],
        cwd=tmp_path,
        env=clean_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("config/dev.yaml: serving.engine.extra_args.revision: 'refs/pr/1' is not a commit")


@pytest.mark.parametrize(
    "change, field, phrase",
    [
        # dev's engine batches at most 32 sequences
        ({"serving": {"engine": {"max_num_batched_tokens": 16}}}, "serving.engine", "16 tokens per step for 32"),
        (
            merge({"serving": {"engine": {"max_num_batched_tokens": 2048}}}, _extra(enable_chunked_prefill=False)),
            "serving.engine",
            "below max_model_len 4096",
        ),
        (_role("decode", max_num_batched_tokens=8), "serving.decode.engine", "8 tokens per step for 32"),
    ],
)
def test_batch_limits_are_checked_against_each_other(tmp_path, change, field, phrase):
    line = _refusal(tmp_path, change)
    assert f": {field}.max_num_batched_tokens: " in line and phrase in line, line
    chunked = merge({"serving": {"engine": {"max_num_batched_tokens": 4096}}}, _extra(enable_chunked_prefill=False))
    config_with(tmp_path, **chunked)


@pytest.mark.parametrize(
    "args, field, phrase",
    [
        ({"enable_expert_parallel": True}, "enable_expert_parallel", "is dense (no expert layers)"),
        ({"enable_eplb": True}, "enable_eplb", "true without enable_expert_parallel: true"),
    ],
)
def test_expert_parallel_is_checked_against_the_model(tmp_path, args, field, phrase):
    line = _refusal(tmp_path, _extra(**args))
    assert f": serving.engine.extra_args.{field}: " in line and phrase in line, line
    config_with(tmp_path, **_extra(enable_expert_parallel=False, enable_eplb=False))


@pytest.mark.parametrize(
    "args, field, phrase",
    [
        ({"watermark": 0.99}, "watermark", "left for requests, less than one 4096-token sequence"),
        ({"mm_ipc_gpu_memory_gb": 4.0}, "mm_ipc_gpu_memory_gb", "left for requests, less than one"),
        ({"watermark": 0.5, "kv_cache_memory_bytes": 200_000_000}, "watermark", "(0.19 GiB of KV cache"),
        ({"mm_processor_cache_type": "shm", "mm_processor_cache_gb": 16}, "mm_processor_cache_type", "in /dev/shm"),
        ({"mm_processor_cache_type": "shm"}, None, None),  # vLLM's 4 GiB within dev's 8 GiB
        ({"watermark": 0.1, "mm_ipc_gpu_memory_gb": 0.5}, None, None),
    ],
)
def test_memory_carved_from_the_kv_cache_or_put_in_shm_is_counted(tmp_path, args, field, phrase):
    if field is None:
        config_with(tmp_path, **_extra(**args))
        return
    line = _refusal(tmp_path, _extra(**args))
    assert f": serving.engine.extra_args.{field}: " in line and phrase in line, line


# --- TP sizes that pair (role_tp_pairing) -------------------------------------------------------------------------


def test_prefill_and_decode_may_differ_in_tp_where_the_kv_layout_pairs(tmp_path):
    # Qwen3.5-9B's 4 KV heads: TP 2 and 4 split them both, so both engines size their blocks alike
    change = merge(FOUR_L4, merge(_role("prefill", tensor_parallel_size=2), _role("decode", tensor_parallel_size=4)))
    cfg = config_with(tmp_path, **change)
    assert [cfg.serving.engine_for(role).tensor_parallel_size for role in ("prefill", "decode")] == [2, 4]


def test_tp_sizes_where_neither_divides_the_other_are_refused(tmp_path):
    # a model whose heads are not known (every TP passes the heads rule): 3 ranks against 2
    model = {"serving": {"model": {"id": "some-model", "source": "example-org/Some-Model", "parameters_billion": 8}}}
    change = merge(
        merge(FOUR_L4, model), merge(_role("prefill", tensor_parallel_size=3), _role("decode", tensor_parallel_size=2))
    )
    line = _refusal(tmp_path, change)
    assert "serving.prefill.engine.tensor_parallel_size: prefill 3, decode 2: " in line
    assert "neither divides the other" in line and line.endswith(
        "(allowed: equal sizes, or one a multiple of the other)"
    )


def test_a_gdn_models_tp_sizes_above_its_kv_heads_are_refused_when_they_differ(tmp_path):
    change = merge(P5, merge(_role("prefill", tensor_parallel_size=2), _role("decode", tensor_parallel_size=8)))
    line = _refusal(tmp_path, change)
    assert "serving.prefill.engine.tensor_parallel_size: prefill 2, decode 8: 'Qwen/Qwen3.5-9B' has 4 KV heads" in line
    assert line.endswith("(allowed: equal sizes, or different sizes of at most 4)")
