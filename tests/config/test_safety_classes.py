"""The safety classes of config/engine_arg_classes.py and config/secret_shapes.py, each fixed by what it means rather
than by a list of known bad values: vLLM engine arguments (every recorded field classified), secret shapes
(and no parser or validation message that echoes one), a secret scan linear in its input, places that do not
exist (regions, AZs, ARN partitions, reserved VPC ranges, tag keys that collide), and alarm thresholds that
could never fire or would always fire. Secret-shaped values are assembled from pieces, never written out whole."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from config import ConfigError, engine_arg_classes, engine_args, load_stage_file, regions, secret_shapes
from config.engine_arg_classes import (
    ENGINE_ARGS_ALLOWED,
    ENGINE_ARGS_OPT_IN,
    ENGINE_ARGS_RESERVED,
    TYPED_ENGINE_ARGS,
    engine_arg_class,
)
from config.engine_arg_ranges import ENGINE_ARG_RANGES
from config.errors import from_validation_error, short
from config.rules import secret_values
from config.schema import Engine, StageConfig
from config.secret_shapes import secret_kind

from ..helpers import ROOT, config_with, merge, stage_data, synth, write_stage
from ..helpers import refusal as _refusal
from .cases import FAKE_HF_TOKEN, FAKE_SECRET_KEY


def _extra(**args):
    return {"serving": {"engine": {"extra_args": args}}}


# --- 12. engine arguments: every recorded field in one class -------------------------------------------


def test_every_recorded_engine_arg_is_in_exactly_one_class():
    recorded = set(engine_args.recorded())
    classes = [set(ENGINE_ARGS_ALLOWED), set(ENGINE_ARGS_RESERVED), set(ENGINE_ARGS_OPT_IN)]
    assert set().union(*classes) == recorded  # a field vLLM adds is unclassified until someone classifies it
    assert sum(len(c) for c in classes) == len(recorded) == 221  # no field in two classes
    assert set(engine_arg_classes.ENGINE_ARG_VALUES) <= set(ENGINE_ARGS_ALLOWED)
    assert set(engine_arg_classes.FREE_STRINGS) <= set(ENGINE_ARGS_ALLOWED) | set(ENGINE_ARGS_OPT_IN)


def test_an_unclassified_field_is_refused(monkeypatch):
    monkeypatch.setattr(engine_arg_classes, "ENGINE_ARGS_ALLOWED", ENGINE_ARGS_ALLOWED - {"seed"})
    assert engine_arg_class("seed")[0] == "unclassified"
    assert engine_args.check_extra("seed", 1).startswith("seed is reserved: not classified")


@pytest.mark.parametrize("name", sorted(ENGINE_ARGS_RESERVED))
def test_every_reserved_engine_arg_is_refused_whatever_its_value(name):
    for value in (True, 1, "x"):
        assert engine_args.check_extra(name, value).startswith(f"{name} is reserved: "), (name, value)


# serving.engine's typed fields, read from the model: cuda_graphs renders compilation_config (reserved for what else
# it opens) and extra_args is the untyped rest; every other one reaches vLLM as the argument of its name.
TYPED_FIELDS = [name for name in Engine.model_fields if name not in ("cuda_graphs", "extra_args")]


def test_every_typed_engine_field_renders_to_a_reserved_argument():
    assert TYPED_FIELDS == list(TYPED_ENGINE_ARGS)  # one missing there would be neither rendered nor reserved
    engine = Engine(
        enforce_eager=False,
        cuda_graphs="decode_only",
        max_num_seqs=8,
        max_num_batched_tokens=64,
        enable_prefix_caching=True,
        gdn_prefill_backend="triton",
    )
    assert list(engine.vllm_kwargs()) == [*TYPED_ENGINE_ARGS, "compilation_config"]
    assert set(engine.vllm_kwargs()) <= set(ENGINE_ARGS_RESERVED)


@pytest.mark.parametrize("name", TYPED_FIELDS)
def test_extra_args_naming_a_typed_fields_argument_is_refused(tmp_path, name):
    line = _refusal(tmp_path, _extra(**{name: 1}))
    assert f": serving.engine.extra_args: {name} is reserved: set by the project (serving.engine's own fields" in line


@pytest.mark.parametrize(
    "name, value, why",
    [
        ("worker_cls", "my.module.Worker", "imports and runs code"),
        ("worker_extension_cls", "evil.Ext", "imports and runs code"),
        ("scheduler_cls", "x.Scheduler", "imports and runs code"),
        ("io_processor_plugin", "p", "imports and runs code"),
        ("reasoning_parser_plugin", "/tmp/p.py", "imports and runs code"),
        ("hf_config_path", "/etc", "replaces the weights, the model's configuration"),
        ("config_format", "mistral", "replaces the weights, the model's configuration"),
        ("model_weights", "/x", "replaces the weights"),
        ("spec_model", "org/draft", "loads a second model"),
        ("kv_transfer_config", "x", "set by the project: the KV connector"),
        ("kv_offloading_backend", "lmcache", "replaces or adds a connector"),
        ("otlp_traces_endpoint", "http://collector:4317", "sends data out"),
        ("allowed_local_media_path", "/", "opens the node's file system"),
        ("download_dir", "/tmp", "opens the node's file system"),
        ("hf_token", True, "carries a secret"),
        ("pipeline_parallel_size", 2, "NIXL connector refuses pipeline parallel on the decode engine"),
        ("master_addr", "10.0.0.1", "spans tensor_parallel_size GPUs of one node"),
    ],
)
def test_reserved_engine_args_are_refused_by_field_with_the_reason(tmp_path, name, value, why):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name} is reserved: " in line and why in line


@pytest.mark.parametrize(
    "name, value",
    [
        ("load_format", "pt"),
        ("load_format", "dummy"),
        ("load_format", "tensorizer"),
        ("load_format", "runai_streamer"),
        ("load_format", "npcache"),
        ("load_format", "gguf"),
        ("load_format", "sharded_state"),
        ("load_format", "Auto"),
        ("model_impl", "terratorch"),
        ("generation_config", "/models/other"),
        ("quantization", "my_plugin_quant"),
        ("quantization", True),
        ("tokenizer_mode", "my_registered_mode"),
    ],
)
def test_string_values_that_name_code_or_files_are_refused(tmp_path, name, value):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name}: {value!r} (allowed: " in line


def _takes_any_string(name: str) -> bool:
    """`str` in the annotation and no Literal choices beside it (tokenizer_mode's Literal | str takes those)."""
    parts = engine_args._parts(engine_args.recorded()[name])
    return parts is not None and str in parts[0] and not parts[1]


def test_every_string_argument_takes_registered_names_only():
    strings = {name for name in ENGINE_ARGS_ALLOWED | set(ENGINE_ARGS_OPT_IN) if _takes_any_string(name)}
    free = strings - set(engine_arg_classes.ENGINE_ARG_VALUES)
    assert free == set(engine_arg_classes.FREE_STRINGS)  # the revisions, pinned to commit ids by a rule


@pytest.mark.parametrize(
    "name, value",
    [
        ("reasoning_parser", "../../tmp/evil"),  # a path where a registered name belongs
        ("reasoning_parser", "/tmp/evil.py"),
        ("reasoning_parser", "my_plugin_parser"),
        ("reasoning_parser", "Qwen3"),  # the registry's names are exact
        ("reasoning_parser", "qwen3 "),
        ("reasoning_parser", "vllm.reasoning.qwen3_reasoning_parser"),
        ("mm_encoder_attn_backend", "CUSTOM"),  # a plugin's backend
        ("mm_encoder_attn_backend", "ROCM_ATTN"),  # another platform's
        ("mm_encoder_attn_dtype", "fp4"),
        ("show_hidden_metrics_for_version", "../x"),
        ("tokenizer_mode", "../../tmp/tok"),
    ],
)
def test_a_string_that_is_no_registered_name_is_refused(tmp_path, name, value):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name}: {value!r} (allowed: " in line, line


@pytest.mark.parametrize(
    "name, value",
    [
        ("reasoning_parser", "qwen3"),
        ("reasoning_parser", "deepseek_r1"),
        ("reasoning_parser", ""),
        ("mm_encoder_attn_backend", "FLASH_ATTN"),
        ("mm_encoder_attn_dtype", "fp8"),
        ("show_hidden_metrics_for_version", "0.25"),
    ],
)
def test_registered_names_are_allowed(tmp_path, name, value):
    assert config_with(tmp_path, **_extra(**{name: value})).serving.engine.extra_args[name] == value


@pytest.mark.parametrize(
    "name, value",
    [
        ("quantization", "fp8"),
        ("load_format", "safetensors"),
        ("load_format", "fastsafetensors"),
        ("model_impl", "transformers"),
        ("generation_config", "vllm"),
        ("tokenizer_mode", "hf"),
        ("kv_cache_dtype", "fp8"),
        ("revision", "0123456789abcdef0123456789abcdef01234567"),
        ("seed", 7),
        ("trust_remote_code", False),
    ],
)
def test_tuning_arguments_are_allowed(tmp_path, name, value):
    cfg = config_with(tmp_path, **_extra(**{name: value}))
    assert cfg.serving.engine.vllm_kwargs()[name] == value


def test_online_fp8_is_a_supported_tuning(tmp_path):
    # was refused: "quantization takes a QuantizationMethods | str | None, not a single value"
    assert engine_arg_class("quantization") == ("allowed", "")
    assert config_with(tmp_path, **_extra(quantization="fp8")).serving.engine.extra_args["quantization"] == "fp8"


# --- 12b. numeric engine arguments: finite, and within the range vLLM states -------------------------------


def _numeric(name: str) -> bool:
    parts = engine_args._parts(engine_args.recorded()[name])
    return parts is not None and bool(parts[0] & {int, float})


def test_every_allowed_numeric_argument_has_a_range_and_no_other_has_one():
    numeric = {name for name in ENGINE_ARGS_ALLOWED if _numeric(name)}
    assert numeric == set(ENGINE_ARG_RANGES)  # a numeric argument vLLM adds is refused until it has a range


def test_a_numeric_argument_without_a_recorded_range_is_refused(monkeypatch):
    monkeypatch.delitem(ENGINE_ARG_RANGES, "seed")
    assert (
        engine_args.check_extra("seed", 7) == "seed: no range is recorded for this numeric argument (allowed: "
        "leave it out)"
    )


NON_FINITE = [
    ("cpu_offload_gb", float("nan")),  # the memory check compared NaN and let it through
    ("cpu_offload_gb", float("inf")),
    ("mm_processor_cache_gb", float("nan")),
    ("mm_ipc_gpu_memory_gb", float("-inf")),
    ("watermark", float("nan")),
    ("kv_cache_metrics_sample", float("nan")),
    ("video_pruning_rate", float("inf")),
    ("mm_encoder_fp8_scale_save_margin", float("nan")),
]


@pytest.mark.parametrize("name, value", NON_FINITE, ids=[f"{n}-{v}" for n, v in NON_FINITE])
def test_a_non_finite_number_is_refused_for_every_float_argument(tmp_path, name, value):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name}: {value!r} is not a finite number (allowed: " in line, line


def test_a_nan_in_a_roles_engine_block_is_refused_there(tmp_path):
    change = {"serving": {"decode": {"replicas": 1, "engine": {"extra_args": {"cpu_offload_gb": float("nan")}}}}}
    line = _refusal(tmp_path, change)
    assert ": serving.decode.engine.extra_args: cpu_offload_gb: nan is not a finite number" in line, line


def test_a_nan_written_as_yaml_text_is_refused(tmp_path):
    text = (ROOT / "config" / "dev.yaml").read_text()
    text = text.replace("language_model_only: true", "language_model_only: true\n      cpu_offload_gb: .nan", 1)
    path = write_stage(tmp_path, text, name="dev")
    with pytest.raises(ConfigError, match=r"cpu_offload_gb: nan is not a finite number"):
        load_stage_file(path)


OUT_OF_RANGE = [
    ("shutdown_timeout", -5, "at least 0", "vllm/config/vllm.py"),
    ("max_parallel_loading_workers", 0, "at least 1", "vllm/config/parallel.py"),
    ("stream_interval", 0, "at least 1", "vllm/config/scheduler.py"),
    ("max_num_partial_prefills", -1, "at least 1", "vllm/config/scheduler.py"),
    ("block_size", 0, "at least 1", "vllm/config/cache.py"),
    ("decode_context_parallel_size", 0, "at least 1", "vllm/config/parallel.py"),
    ("kv_cache_memory_bytes", 0, "at least 1", "vllm/config/cache.py"),
    ("kv_cache_memory_bytes", -1, "at least 1", "vllm/config/cache.py"),
    ("watermark", 1.0, "at least 0 and less than 1", "vllm/config/scheduler.py"),
    ("watermark", 1.5, "at least 0 and less than 1", "vllm/config/scheduler.py"),
    ("mm_ipc_gpu_memory_gb", -1.0, "at least 0", "vllm/config/multimodal.py"),
    ("kv_cache_metrics_sample", 0.0, "more than 0 and at most 1", "vllm/config/observability.py"),
    ("max_logprobs", -2, "at least -1", "vllm/config/model.py"),
    ("seed", -1, "at least 0 and at most 4294967295", "vllm/utils/torch_utils.py"),
    ("seed", 2**32, "at least 0 and at most 4294967295", "vllm/utils/torch_utils.py"),
    ("renderer_num_workers", 0, "at least 1", "vllm/renderers/base.py"),
    ("distributed_timeout_seconds", 0, "at least 1", "vllm/distributed/utils.py"),
    ("safetensors_prefetch_num_threads", 0, "at least 1", "vllm/config/load.py"),
]


@pytest.mark.parametrize("name, value, allowed, source", OUT_OF_RANGE, ids=[f"{n}={v}" for n, v, _, _ in OUT_OF_RANGE])
def test_a_number_outside_vllms_range_is_refused(tmp_path, name, value, allowed, source):
    line = _refusal(tmp_path, _extra(**{name: value}))
    assert f": serving.engine.extra_args: {name}: {value!r} is outside vLLM's range ({source}" in line, line
    assert line.endswith(f"(allowed: {allowed})"), line


@pytest.mark.parametrize(
    "name, value",
    [
        ("shutdown_timeout", 0),
        ("max_parallel_loading_workers", 1),
        ("watermark", 0.0),
        ("kv_cache_metrics_sample", 1.0),
        ("max_logprobs", -1),
        ("seed", 2**32 - 1),
        ("mamba_cache_philox_rounds", 0),
    ],
)
def test_the_edges_of_each_range_are_allowed(tmp_path, name, value):
    assert config_with(tmp_path, **_extra(**{name: value})).serving.engine.extra_args[name] == value


def test_an_opt_in_argument_needs_its_name_in_the_opt_in_list(tmp_path):
    line = _refusal(tmp_path, _extra(trust_remote_code=True))
    assert ": serving.engine.extra_args.trust_remote_code: True: trust_remote_code runs the Python code" in line
    assert "allowed: only with serving.allow_unsafe_engine_args: [trust_remote_code]" in line
    cfg = config_with(
        tmp_path,
        serving={
            "engine": {"extra_args": {"trust_remote_code": True}},
            "allow_unsafe_engine_args": ["trust_remote_code"],
        },
    )
    assert cfg.serving.engine.vllm_kwargs()["trust_remote_code"] is True
    assert "allow_unsafe_engine_args" not in cfg.serving.engine.vllm_kwargs()


@pytest.mark.parametrize(
    "listed, extra, phrase",
    [
        (["worker_cls"], {}, "worker_cls is reserved"),
        (["seed"], {"seed": 1}, "seed needs no opt-in"),
        (["no_such_arg"], {}, "is not an opt-in engine argument"),
        (["trust_remote_code"], {}, "is not turned on in serving.engine.extra_args"),
        (["trust_remote_code"], {"trust_remote_code": False}, "is not turned on"),
        (["enable_prompt_embeds", "enable_prompt_embeds"], {"enable_prompt_embeds": True}, "listed twice"),
    ],
)
def test_the_opt_in_list_names_only_opt_in_arguments_that_are_turned_on(tmp_path, listed, extra, phrase):
    line = _refusal(tmp_path, {"serving": {"allow_unsafe_engine_args": listed, "engine": {"extra_args": extra}}})
    assert ": serving.allow_unsafe_engine_args[" in line and phrase in line


def test_an_opted_in_argument_is_a_synth_warning(tmp_path):
    cfg = config_with(
        tmp_path,
        serving={
            "engine": {"extra_args": {"trust_remote_code": True}},
            "allow_unsafe_engine_args": ["trust_remote_code"],
        },
    )
    result = synth([cfg], tmp_path / "out")
    warnings = [
        str(e.data)
        for c in result.stages["dev"].node.find_all()
        for e in c.node.metadata
        if e.type == "aws:cdk:warning"
    ]
    assert len(warnings) == 1 and "vLLM runs with trust_remote_code turned on" in warnings[0]


# --- 13. secrets: more shapes, under any key, never echoed -------------------------------------------------

TOKEN_BODY = "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
SHAPES = [
    ("a Hugging Face organization token", "api_" + "org_" + TOKEN_BODY[:34]),
    ("a GitLab token", "gl" + "pat-" + TOKEN_BODY[:20]),
    ("a GitLab token", "gl" + "dt-" + TOKEN_BODY[:24]),
    ("a GitLab token", "gl" + "rt-" + TOKEN_BODY[:26]),
    ("a GitLab token", "gl" + "cbt-" + TOKEN_BODY[:26]),
    ("a GitLab token", "GR1348" + "941" + TOKEN_BODY[:20]),
    ("a Slack token", "xo" + "xb-1234567890-" + TOKEN_BODY[:24]),
    ("a Slack token", "xo" + "xp-1234567890-" + TOKEN_BODY[:24]),
    ("a Slack token", "xo" + "xe.xoxp-1-" + TOKEN_BODY[:24]),
    ("a Slack token", "xa" + "pp-1-A0123-" + TOKEN_BODY[:20]),
    ("a Slack webhook URL", "https://hooks." + "slack.com/services/T0123/B0456/" + TOKEN_BODY[:24]),
    ("a private key", "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n\nlQOYBF..."),
    ("a private key", "-----BEGIN EC " + "PRIVATE KEY-----"),
    ("a private key", "-----BEGIN ENCRYPTED " + "PRIVATE KEY-----"),
    ("a private key", "-----BEGIN " + "PRIVATE KEY-----"),
    ("a private key", "-----begin openssh " + "private key-----"),
    ("an OpenSSH private key", "b3BlbnNzaC1" + "rZXktdjEAAAAABG5vbmU"),
    ("a PuTTY private key", "PuTTY-User-" + "Key-File-3: ssh-ed25519"),
    ("an OpenAI API key", "sk-proj-" + TOKEN_BODY[:20] + "T3Blbk" + "FJ" + TOKEN_BODY[:20]),
    ("a Google API key", "AI" + "za" + TOKEN_BODY[:35]),
    ("a JSON Web Token", "ey" + "JhbGciOiJIUzI1NiJ9.ey" + "JzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r"),
    ("an AWS secret access key", FAKE_SECRET_KEY),  # under no key-like key at all
    ("an AWS secret access key", "line one\n" + FAKE_SECRET_KEY + "\nline three"),  # on its own line
    ("a random-looking token (an API key or password)", "Zq8" + TOKEN_BODY[:32]),  # an unknown service's key
    # round five (issue #52)
    ("an Azure AD client secret", "xYz8" + "Q~" + TOKEN_BODY[:20] + "~.-" + TOKEN_BODY[:11]),
    ("an Azure AD client secret", "a_." + "7Q~" + TOKEN_BODY[:31]),
    ("a JSON Web Token", "ey" + "JhbGciOiJub25lIn0.ey" + "JzdWIiOiJhZG1pbiJ9."),  # alg none: no signature
    ("a JSON Web Token", "ey" + "AiYWxnIjogIkhTMjU2IiB9.ey" + "JzdWIiOiJhIn0.c2ln"),  # '{ "alg"' with a space
    ("a JSON Web Token", "ew" + "oiYWxnIjoiUlMyNTYifQ.ey" + "JzdWIiOiJhIn0.AbC-_9"),  # '{\n"alg"'
    ("a bearer token", "Authorization: Bear" + "er " + "0123456789abcdef" * 2),
    ("a bearer token", "bear" + "er\t" + TOKEN_BODY[:20]),
    ("a bearer token", "BEAR" + "ER " + "tok3n-abc"),  # short, with a digit
    ("a token with a datacenter suffix", "0123456789abcdef" + "fedcba9876543210" + "-us21"),
    ("a token with a datacenter suffix", "9f8e7d6c5b4a39281706" + "f5e4d3c2b1a09988" + "-us1"),
    ("a token with a datacenter suffix", TOKEN_BODY[:24] + "-eu3"),
]


@pytest.mark.parametrize("kind, value", SHAPES, ids=[f"{i}-{k}" for i, (k, _) in enumerate(SHAPES)])
def test_secret_shapes_are_recognised_under_any_key(kind, value):
    assert secret_kind(value, "owner") == kind


@pytest.mark.parametrize(
    "value",
    [
        "ProjectAlphaBetaGammaDeltaEpsilonZeta123",
        "HuggingFaceTokenForQwenModelsProdUsWest2",
        "0123456789abcdef0123456789abcdef01234567",  # a commit id: revision pins are allowed
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray@sha256:" + "ab12" * 16,
        "Qwen/Qwen3.5-9B",
        "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token-AbCdEf",
        "pd-inference/HuggingFaceToken/prod",
        "glass-production-cluster-blue-2025",
        "sk-not-a-key",
        "team platform engineering",
        "/var/lib/model-cache",
        "the bearer of this note",  # prose after bearer
        "Bearer authentication",
        "eyeballs.eyebrows.eyes",  # e-words that are no base64 JSON
        "cdk-hnb659fds-assets-123456789012-us-west-2",  # a region is no datacenter suffix
        "pd-inference-dev-gpu-us2",
        "team~ops.platform",
    ],
)
def test_names_ids_and_paths_are_not_secrets(value):
    assert secret_kind(value, "owner") is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"tags": {"owner": FAKE_SECRET_KEY}}, "tags.owner"),
        ({"tags": {"team": SHAPES[1][1]}}, "tags.team"),
        ({"serving": {"image": SHAPES[6][1]}}, "serving.image"),
        ({"benchmark": {"tokenizer": SHAPES[11][1]}}, "benchmark.tokenizer"),
    ],
)
def test_new_shapes_are_refused_anywhere_in_a_stage_file_tags_included(tmp_path, change, field):
    line = _refusal(tmp_path, change)
    assert f": {field}: looks like " in line
    assert not any(value[:12] in line for _, value in SHAPES)


def _secret_free(line: str, secret: str) -> bool:
    return all(secret[i : i + 16] not in line for i in range(len(secret) - 15))


@pytest.mark.parametrize(
    "text",
    [
        f"stage: dev\nregion: *{FAKE_HF_TOKEN}\n",  # an undefined alias: PyYAML names it
        f"stage: dev\nregion: !{FAKE_HF_TOKEN} us-west-2\n",  # an unknown tag: PyYAML names it
        f"stage: dev\n{FAKE_HF_TOKEN}: 1\n{FAKE_HF_TOKEN}: 2\n",  # a duplicate key: the loader names it
        f"stage: dev\ntags: {{owner: {FAKE_HF_TOKEN}, x: [\n",  # a token inside a malformed line
    ],
    ids=["undefined-alias", "unknown-tag", "duplicate-key", "malformed-line"],
)
def test_a_yaml_error_never_echoes_a_secret(tmp_path, text):
    path = write_stage(tmp_path, text, name="dev")
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    line = str(caught.value)
    assert line.startswith(f"{path}: (file): ") and _secret_free(line, FAKE_HF_TOKEN), line


def test_a_wrongly_typed_secret_is_never_echoed(tmp_path):
    line = _refusal(tmp_path, {"gpu_nodegroup": {"count": FAKE_HF_TOKEN}})
    assert ": gpu_nodegroup.count: looks like a Hugging Face token" in line and _secret_free(line, FAKE_HF_TOKEN)
    # and pydantic's own message, which quotes the input, when something reaches it
    data = merge(stage_data("dev"), {"gpu_nodegroup": {"count": FAKE_HF_TOKEN}})
    with pytest.raises(ValidationError) as caught:
        StageConfig.model_validate(data)
    message = str(from_validation_error("dev.yaml", StageConfig, caught.value))
    assert "gpu_nodegroup.count: expected integer, got str <a value that looks like a Hugging Face token" in message
    assert _secret_free(message, FAKE_HF_TOKEN)
    assert short("x" * 30 + " " + FAKE_HF_TOKEN) == "<a value that looks like a Hugging Face token, not shown>"
    assert _secret_free(str(ConfigError("p", "f", f"got {FAKE_SECRET_KEY!r} and {FAKE_HF_TOKEN}")), FAKE_SECRET_KEY)


# --- 18. the secret scan is linear ---------------------------------------------------------------------

WORDY_RUN = "ProjectAlphaBetaGammaDeltaEpsilonZeta123"  # random-looking and word-like: scanned in full, not refused


class _Counting:
    """A stand-in for KEY_CONTEXT that counts the characters it is asked to search."""

    def __init__(self, pattern):
        self.pattern, self.chars = pattern, 0

    def search(self, text, *args):
        self.chars += len(text)
        return self.pattern.search(text, *args)


def test_the_key_context_is_searched_once_per_string(monkeypatch):
    counting = _Counting(secret_shapes.KEY_CONTEXT)
    monkeypatch.setattr(secret_shapes, "KEY_CONTEXT", counting)
    text = (WORDY_RUN + " ") * 1500  # 61,500 characters, 1,500 runs of 40
    assert secret_kind(text, "note") is None
    # before: the key and the text before each run were searched for every run (1,500 x 30 KiB on average)
    assert counting.chars <= len(text) + len("note")


def test_an_aliased_string_is_scanned_once_and_the_file_loads_fast(tmp_path, monkeypatch):
    calls = []
    real = secret_values.secret_kind
    monkeypatch.setattr(secret_values, "secret_kind", lambda text, *args: calls.append(len(text)) or real(text, *args))
    big = (WORDY_RUN + " ") * 1500
    text = f'stage: dev\nblob: &b "{big}"\nmore: [{", ".join(["*b"] * 63)}]\n'  # 64 visits of 61,500 characters
    path = write_stage(tmp_path, text, name="dev")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=": blob: unknown key"):
        load_stage_file(path)
    elapsed = time.perf_counter() - start
    assert calls.count(len(big)) == 1  # once, not 64 times
    assert elapsed < 5, elapsed  # measured: 268 s before (quadratic, once per alias), 0.1 s after


def test_a_string_over_64_kib_is_refused_in_one_line(tmp_path):
    path = write_stage(tmp_path, f'stage: dev\nblob: "{"a" * (64 * 1024 + 1)}"\n', name="dev")
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert str(caught.value) == (
        f"{path}: blob: a string of 65537 characters (allowed: up to 65536; no setting of a stage file is that long)"
    )


# --- 15. places that do not exist ------------------------------------------------------------------------


def test_the_committed_regions_are_botocores_of_the_pinned_version():
    import botocore

    pinned = re.search(r"^botocore==(\S+)$", (ROOT / "constraints.txt").read_text(), re.MULTILINE).group(1)
    table = json.loads((ROOT / "config" / "regions.json").read_text())
    assert table["botocore"] == pinned == botocore.__version__, "re-record config/regions.json for the new pin"
    data = json.loads((Path(botocore.__file__).parent / "data" / "endpoints.json").read_text())
    assert table["partitions"] == {
        p["partition"]: {"regionRegex": p["regionRegex"], "regions": sorted(p["regions"])} for p in data["partitions"]
    }
    assert "us-west-2" in table["partitions"]["aws"]["regions"] and table["stage_partitions"] == ["aws"]


@pytest.mark.parametrize(
    "region, phrase",
    [
        ("us-west-3", "'us-west-3' is not an AWS region, did you mean us-west-2?"),
        ("eu-west-9", "is not an AWS region"),
        ("mx-central-2", "is not an AWS region"),
        ("cn-north-1", "cn-north-1 is a region of the aws-cn partition; this app deploys to aws only"),
        ("us-gov-west-1", "is a region of the aws-us-gov partition"),
    ],
)
def test_a_region_that_does_not_exist_here_is_refused(tmp_path, region, phrase):
    line = _refusal(
        tmp_path,
        {
            "region": region,
            "availability_zones": [f"{region}a", f"{region}b"],
            "gpu_availability_zone": f"{region}a",
            "network": {"vpc_cidr": "10.0.0.0/17"},
        },
    )
    assert ": region: " in line and phrase in line and "(allowed: af-south-1, " in line


def test_every_region_of_the_table_is_accepted():
    assert [r for r in regions.stage_regions() if regions.region_problem(r)] == []
    assert len(regions.stage_regions()) >= 30


@pytest.mark.parametrize("zone, ok", [("us-west-2f", True), ("us-west-2g", False), ("us-west-2z", False)])
def test_an_az_letter_beyond_f_names_no_az(tmp_path, zone, ok):
    change = {"availability_zones": ["us-west-2a", "us-west-2b", zone]}
    if ok:
        assert config_with(tmp_path, **change).availability_zones[2] == zone
    else:
        line = _refusal(tmp_path, change)
        assert f": availability_zones[2]: '{zone}' names AZ letter" in line and "us-west-2a to us-west-2f" in line


@pytest.mark.parametrize(
    "change, field",
    [
        (
            {
                "cluster": {
                    "admin_principal_arns": ["arn:aws-cn:iam::123456789012:role/Admin"],
                    "allow_no_admin_principals": False,
                }
            },
            "cluster.admin_principal_arns[0]",
        ),
        (
            {"observability": {"alarm_topic_arn": "arn:aws-us-gov:sns:us-west-2:123456789012:alarms"}},
            "observability.alarm_topic_arn",
        ),
        (
            {"serving": {"hf_token_secret": "arn:aws-cn:secretsmanager:us-west-2:123456789012:secret:hf-AbCdEf"}},
            "serving.hf_token_secret",
        ),
    ],
)
def test_every_arn_is_in_the_partition_of_the_region(tmp_path, change, field):
    line = _refusal(tmp_path, change)
    assert f": {field}: the ARN is in partition aws-" in line and "the stage's region us-west-2 in aws" in line


@pytest.mark.parametrize(
    "cidr, what",
    [
        ("169.254.0.0/16", "link-local"),
        ("127.0.0.0/16", "loopback"),
        ("0.0.0.0/16", "'this network'"),
        ("172.17.0.0/16", "used by AWS services"),
        ("224.0.0.0/16", "multicast"),
        ("240.0.0.0/16", "reserved for future use"),
        ("198.18.0.0/16", "benchmarking"),
        ("192.0.0.0/16", "IETF protocol assignments"),
    ],
)
def test_a_reserved_range_is_no_vpc(tmp_path, cidr, what):
    line = _refusal(tmp_path, {"network": {"vpc_cidr": cidr}})
    assert f": network.vpc_cidr: {cidr} overlaps " in line and what in line


@pytest.mark.parametrize(
    "cidr, canonical",
    [
        ("10.0.0.0/255.255.0.0", "10.0.0.0/16"),  # a netmask
        ("10.0.0.0/0.0.255.255", "10.0.0.0/16"),  # a hostmask
        ("10.0.0.0/016", "10.0.0.0/16"),  # a prefix with a leading zero
        ("10.0.0.0", "10.0.0.0/32"),  # a bare address
    ],
)
def test_a_vpc_range_not_in_prefix_length_form_is_refused(tmp_path, cidr, canonical):
    line = _refusal(tmp_path, {"network": {"vpc_cidr": cidr}})
    assert line.endswith(
        f": network.vpc_cidr: {cidr!r} is not in prefix-length form (allowed: {canonical}, written a.b.c.d/n)"
    ), line


@pytest.mark.parametrize(
    "cidr, canonical",
    [
        ("198.51.100.0/255.255.255.0", "198.51.100.0/24"),
        ("198.51.100.0/0.0.0.255", "198.51.100.0/24"),
        ("198.51.100.0/024", "198.51.100.0/24"),
        ("2001:DB8::/32", "2001:db8::/32"),  # IPv6 too is judged as written (then refused as IPv6)
    ],
)
def test_an_endpoint_range_not_in_prefix_length_form_is_refused(tmp_path, cidr, canonical):
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": ["203.0.113.0/24", cidr]}}})
    assert (
        f": cluster.endpoint.public_access_cidrs[1]: {cidr!r} is not in prefix-length form (allowed: {canonical},"
        in line
    )


@pytest.mark.parametrize(
    "cidr",
    [
        "10.0.0.0/16",
        "172.16.0.0/16",
        "172.18.0.0/16",
        "192.168.0.0/16",
        "100.64.0.0/16",
        "198.19.0.0/16",
        "44.0.0.0/16",
    ],
)
def test_private_cgnat_and_public_ranges_may_be_a_vpc(tmp_path, cidr):
    assert config_with(tmp_path, network={"vpc_cidr": cidr}).network.vpc_cidr == cidr


@pytest.mark.parametrize(
    "tags, field",
    [
        ({"Team": "a", "team": "b"}, "tags.team"),
        ({"owner": "a", "x": "b", "OWNER": "c"}, "tags.OWNER"),
        ({"Straße": "a", "STRASSE": "b"}, "tags.STRASSE"),
    ],
)
def test_tag_keys_that_differ_only_in_case_are_refused(tmp_path, tags, field):
    line = _refusal(tmp_path, {"tags": tags})
    assert f": {field}: differs from tags." in line and "only in case" in line


# --- 17. alarm thresholds ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, field, phrase",
    [
        ({"error_rate_percent": 100}, "error_rate_percent", "(allowed: more than 0 and less than 100)"),
        (
            {"gpu_memory_percent": 100},
            "gpu_memory_percent",
            "never more than 100% used (allowed: more than 94.45 and less",
        ),
        # 0.90 x 100 plus 1 GiB of an L4's 23,034 MiB (4.45 %) outside vLLM's budget
        (
            {"gpu_memory_percent": 94.4},
            "gpu_memory_percent",
            "vLLM and the CUDA context hold 94.45% of each GPU's memory from the start",
        ),
        ({"gpu_memory_percent": 90.0001}, "gpu_memory_percent", "so the alarm would always fire (allowed: more than"),
        ({"gpu_memory_percent": 50}, "gpu_memory_percent", "so the alarm would always fire (allowed: more than 94.45"),
        ({"ttft_p99_slo_seconds": 0.0009}, "ttft_p99_slo_seconds", "below vLLM's smallest time-to-first-token bucket"),
    ],
)
def test_an_alarm_that_can_never_fire_or_always_fires_is_refused(tmp_path, settings, field, phrase):
    line = _refusal(tmp_path, {"observability": settings})
    assert f": observability.{field}: " in line and phrase in line


def test_a_ttft_slo_at_the_request_timeout_never_fires(tmp_path):
    line = _refusal(
        tmp_path, {"benchmark": {"request_timeout_seconds": 60}, "observability": {"ttft_p99_slo_seconds": 60}}
    )
    assert ": observability.ttft_p99_slo_seconds: 60 s is not below benchmark.request_timeout_seconds (60)" in line
    assert "(allowed: 0.001 s or more, and less than 60 s)" in line


@pytest.mark.parametrize(
    "settings, engine",
    [
        ({"error_rate_percent": 99.9}, {}),
        ({"error_rate_percent": 0.01}, {}),
        ({"gpu_memory_percent": 94.5}, {}),  # 90 + the CUDA context's 4.45 on an L4, just above
        ({"gpu_memory_percent": 99.99}, {}),
        ({"gpu_memory_percent": 99.5}, {"gpu_memory_utilization": 0.95}),
        ({"ttft_p99_slo_seconds": 0.001}, {}),
        ({"ttft_p99_slo_seconds": 599}, {}),
    ],
)
def test_thresholds_just_inside_the_range_are_accepted(tmp_path, settings, engine):
    cfg = config_with(tmp_path, observability=settings, serving={"engine": engine})
    assert all(getattr(cfg.observability, k) == v for k, v in settings.items())


def test_the_shipped_stages_are_inside_every_range():
    for stage in ("dev", "prod"):
        assert load_stage_file(ROOT / "config" / f"{stage}.yaml").stage == stage
    assert os.path.exists(regions.REGIONS_FILE)
