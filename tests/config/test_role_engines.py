"""Per-role engine settings (serving.prefill.engine, serving.decode.engine over serving.engine): the merge rule,
the same field rules as serving.engine, the cross-field rules on each role's effective settings, and the refusal
in colocated mode. Every refusal is one line naming the stage file and the field."""

from __future__ import annotations

import pytest

from config import ConfigError, load_stage_file
from config.schema import Engine, RoleEngine, merged_engine

from ..helpers import config_with, merge, stage_data, write_stage
from ..helpers import refusal as _refusal
from .test_workload_rules import FOUR_L4, P5


def _role(role: str, replicas: int = 1, **engine) -> dict:
    return {"serving": {role: {"replicas": replicas, "engine": engine}}}


# --- the merge rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_without_role_blocks_each_role_runs_serving_engine_itself(stages, stage):
    serving = stages[stage].serving
    assert serving.prefill.engine is None and serving.decode.engine is None
    assert serving.engine_for("prefill") is serving.engine_for("decode") is serving.engine


def test_a_role_key_replaces_the_shared_one_and_extra_args_merge_key_by_key():
    shared = Engine(max_num_seqs=64, extra_args={"block_size": 16, "enable_chunked_prefill": True})
    role = RoleEngine(max_num_batched_tokens=16384, max_num_seqs=8, extra_args={"block_size": 32, "stream_interval": 2})
    merged = merged_engine(shared, role)
    assert merged.max_num_seqs == 8 and merged.max_num_batched_tokens == 16384
    assert merged.max_model_len == shared.max_model_len and merged.dtype == shared.dtype  # not named: kept
    # the role's value wins; the shared keys keep their order, a new key comes after them
    assert merged.extra_args == {"block_size": 32, "enable_chunked_prefill": True, "stream_interval": 2}
    assert list(merged.extra_args) == ["block_size", "enable_chunked_prefill", "stream_interval"]
    assert merged_engine(shared, None) is shared
    assert merged_engine(shared, RoleEngine()) == shared


def test_a_role_block_names_every_key_of_serving_engine_and_nothing_else():
    assert list(RoleEngine.model_fields) == list(Engine.model_fields)


# --- the same field rules as serving.engine -----------------------------------------------------------------


def test_an_invalid_role_value_is_refused_naming_the_file_and_the_roles_field(tmp_path, monkeypatch):
    (tmp_path / "config").mkdir()
    write_stage(tmp_path / "config", merge(stage_data("dev"), _role("decode", max_num_seqs=0)), name="dev")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_stage_file("config/dev.yaml")
    assert str(caught.value) == (
        "config/dev.yaml: serving.decode.engine.max_num_seqs: Input should be greater than or equal to 1 (got 0)"
    )


@pytest.mark.parametrize(
    ("engine", "field", "phrase"),
    [
        ({"max_model_len": 0}, "serving.prefill.engine.max_model_len", "greater than or equal to 1"),
        ({"dtype": "float8"}, "serving.prefill.engine.dtype", "is not allowed"),
        ({"gpu_memory_utilization": 1.0}, "serving.prefill.engine.gpu_memory_utilization", "less than or equal"),
        ({"enforce_eager": "yes"}, "serving.prefill.engine.enforce_eager", "expected"),
        ({"max_num_seqs": "64"}, "serving.prefill.engine.max_num_seqs", "quoted, so YAML reads it as text"),
        ({"max_num_seqs": None}, "serving.prefill.engine.max_num_seqs", "null is no setting here"),
        ({"max_model_len": None}, "serving.prefill.engine.max_model_len", "null is no setting here"),
        ({"gdn_prefill_backend": "cuda"}, "serving.prefill.engine.gdn_prefill_backend", "is not allowed"),
        ({"max_num_sequences": 8}, "serving.prefill.engine.max_num_sequences", "unknown key"),
        ({"extra_args": {"kv_transfer_config": "x"}}, "serving.prefill.engine.extra_args", "is reserved"),
        ({"extra_args": {"block_sise": 16}}, "serving.prefill.engine.extra_args", "not an engine argument of vLLM"),
        ({"extra_args": {"block_size": "16"}}, "serving.prefill.engine.extra_args", "block_size: '16'"),
    ],
)
def test_a_role_block_is_validated_like_serving_engine(tmp_path, engine, field, phrase):
    line = _refusal(tmp_path, _role("prefill", **engine))
    assert f": {field}: " in line and phrase in line, line


def test_too_many_extra_args_together_are_refused_on_the_role(tmp_path):
    from config.engine_arg_classes import ENGINE_ARGS_ALLOWED
    from config.engine_args import check_extra

    # a value each takes (a number, or a flag); the schema alone is satisfied, the count is refused first
    takes = {name: next((v for v in (1, False) if check_extra(name, v) is None), None) for name in ENGINE_ARGS_ALLOWED}
    committed = stage_data("dev")["serving"]["engine"].get("extra_args", {})  # the stage's own, kept
    names = sorted(name for name, value in takes.items() if value is not None and name not in committed)[:40]
    assert len(names) == 40  # 20 in serving.engine, 20 others in the role's: each block within its own 32
    shared, role = {name: takes[name] for name in names[:20]}, {name: takes[name] for name in names[20:]}
    line = _refusal(tmp_path, merge({"serving": {"engine": {"extra_args": shared}}}, _role("decode", extra_args=role)))
    assert f": serving.decode.engine.extra_args: {40 + len(committed)} extra engine arguments together" in line


# --- colocated mode -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_colocated_mode_refuses_a_role_block_in_one_line(tmp_path, role):
    line = _refusal(tmp_path, merge({"serving": {"mode": "colocated"}}, _role(role, max_num_seqs=8)))
    assert f": serving.{role}.engine: a per-role engine block in colocated mode" in line
    assert "serving.mode: pd" in line


def test_colocated_mode_refuses_even_an_empty_role_block(tmp_path):
    line = _refusal(tmp_path, merge({"serving": {"mode": "colocated"}}, _role("decode")))
    assert ": serving.decode.engine: " in line


# --- the cross-field rules, on each role's effective settings ---------------------------------------------------


def test_a_roles_context_is_checked_against_the_benchmark_profiles(tmp_path):
    line = _refusal(tmp_path, _role("decode", max_model_len=2048))
    assert ": benchmark.profiles[1].input_tokens: " in line
    assert "the served context serving.decode.engine.max_model_len 2048" in line


def test_the_shared_context_is_named_when_a_role_does_not_change_it(tmp_path):
    change = merge({"serving": {"engine": {"max_model_len": 2048}}}, _role("decode", max_num_seqs=8))
    assert "the served context serving.engine.max_model_len 2048" in _refusal(tmp_path, change)


def test_a_roles_context_beyond_its_memory_is_refused_on_the_role(tmp_path):
    line = _refusal(tmp_path, _role("decode", max_model_len=100_000))
    assert ": serving.decode.engine.max_model_len: 100000 tokens of KV cache" in line
    assert "one decode engine has" in line


def test_a_roles_tensor_parallel_size_beyond_the_node_is_refused_on_the_role(tmp_path):
    line = _refusal(tmp_path, _role("prefill", tensor_parallel_size=2))
    assert ": serving.prefill.engine.tensor_parallel_size: 2 GPUs per engine, but a g6.8xlarge has 1" in line


def test_pipeline_parallel_on_the_prefill_role_alone_is_refused_with_the_pd_limit(tmp_path):
    # prefill-only PP is the one PD layout upstream NIXL works on (push mode, non-hybrid models): still refused here
    line = _refusal(tmp_path, _role("prefill", extra_args={"pipeline_parallel_size": 2}))
    assert ": serving.prefill.engine.extra_args: pipeline_parallel_size is reserved: not supported: with PD" in line
    assert 'docs/DECISIONS.md, "Pipeline parallel: refused"' in line and "\n" not in line


def test_roles_of_different_tensor_parallel_sizes_pack_onto_the_nodes_together(tmp_path):
    # two g6.12xlarge (4 L4 each): prefill TP 2 and decode TP 1
    fits = merge(FOUR_L4, merge(_role("prefill", 2, tensor_parallel_size=2), _role("decode", 4)))
    cfg = config_with(tmp_path, **fits)  # 2 x 2 + 4 x 1 = 8 GPUs: fits exactly
    assert cfg.serving.engine_for("prefill").tensor_parallel_size == 2
    assert cfg.serving.engine_for("decode").tensor_parallel_size == 1
    line = _refusal(tmp_path, merge(FOUR_L4, merge(_role("prefill", 3, tensor_parallel_size=2), _role("decode", 3))))
    assert ": serving.prefill: prefill + decode need up to 9 GPUs (prefill 3 x TP 2 + decode 3 x TP 1" in line


def test_a_roles_gdn_backend_is_checked_on_hopper(tmp_path):
    # P5's serving.engine sets triton; decode's own flashinfer is the SM90 kernel that is missing
    line = _refusal(tmp_path, merge(P5, _role("decode", gdn_prefill_backend="flashinfer")))
    assert ": serving.decode.engine.gdn_prefill_backend: flashinfer on H100" in line


def test_an_opt_in_argument_of_a_role_needs_its_opt_in(tmp_path):
    line = _refusal(tmp_path, _role("decode", extra_args={"enable_prompt_embeds": True}))
    assert ": serving.decode.engine.extra_args.enable_prompt_embeds: " in line
    cfg = config_with(
        tmp_path,
        **merge(
            {"serving": {"allow_unsafe_engine_args": ["enable_prompt_embeds"]}},
            _role("decode", extra_args={"enable_prompt_embeds": True}),
        ),
    )
    shared = cfg.serving.engine.extra_args
    assert cfg.serving.engine_for("decode").extra_args == {**shared, "enable_prompt_embeds": True}
    assert "enable_prompt_embeds" not in shared


def test_an_opt_in_turned_on_by_no_engine_is_refused_naming_every_place(tmp_path):
    change = merge({"serving": {"allow_unsafe_engine_args": ["enable_prompt_embeds"]}}, _role("decode", max_num_seqs=8))
    line = _refusal(tmp_path, change)
    assert ": serving.allow_unsafe_engine_args[0]: enable_prompt_embeds is not turned on in the extra_args of" in line


def test_the_gpu_memory_alarm_is_judged_against_the_hungriest_role(tmp_path):
    change = merge({"observability": {"gpu_memory_percent": 92}}, _role("prefill", gpu_memory_utilization=0.95))
    line = _refusal(tmp_path, change)
    assert (
        ": observability.gpu_memory_percent: " in line
        and "(serving.prefill.engine.gpu_memory_utilization and 1 GiB" in line
    )
