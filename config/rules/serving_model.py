"""Rules of the `serving.model` section (docs/STAGE_FILE.md): where the weights come from, who may load them, that
they fit the engine's GPUs, and the warning for an id that names another model."""

from __future__ import annotations

import math
import re

from ..derived import RUNTIME_RESERVE_GIB as RUNTIME_RESERVE
from ..derived import (
    gpu_spec,
    is_gated,
    model_memory_floor,
)
from ..errors import ConfigError, short
from ..schema import StageConfig
from .serving_engine_tuning import tp_sizes


def weights_fit(cfg: StageConfig, path: str) -> None:
    """The model's weights, one max_model_len sequence of KV cache (when the architecture is known) and a
    1 GiB runtime reserve must fit one engine's GPUs at gpu_memory_utilization (config/derived.py:
    model_memory_floor). A model of unknown size (not in KNOWN_MODELS, no size in its name, no
    serving.model.parameters_billion) is not checked. Checked for every engine the mode runs (a PD role with its
    own engine block as it runs)."""
    for role in cfg.serving.engine_roles():
        _model_fits(cfg, path, role)


def _model_fits(cfg: StageConfig, path: str, role: str | None) -> None:
    engine, gpu = cfg.serving.engine_for(role), gpu_spec(cfg)
    floor = model_memory_floor(cfg, engine)
    if floor is None or floor.gpu_gib <= 0 or floor.needed_gib <= floor.available_gib:
        return  # unknown size, or an instance type without a recorded GPU memory
    # "one engine" unless the role runs other settings than serving.engine: then which role's engine
    which = f"one {role} engine" if engine != cfg.serving.engine else "one engine"
    have = (
        f"{which} has {floor.available_gib:.1f} GiB ({floor.gpus} x {gpu.gpu_model} {floor.gpu_gib:g} GiB x "
        f"gpu_memory_utilization {engine.gpu_memory_utilization:g})"
    )
    weights = (
        f"{floor.parameters / 1e9:.2f}e9 parameters ({floor.basis}) x {floor.bytes_per_parameter:g} bytes = "
        f"{floor.weights_gib:.1f} GiB of weights"
    )
    fixed = floor.weights_gib + RUNTIME_RESERVE
    if floor.kv_gib and fixed <= floor.available_gib:
        # the weights fit: it is the context that does not
        tokens = int((floor.available_gib - fixed) / floor.kv_gib * engine.max_model_len)
        raise ConfigError(
            path,
            cfg.serving.engine_field(role, "max_model_len"),
            f"{engine.max_model_len} tokens of KV cache ({floor.kv_gib:.1f} GiB for one sequence) + "
            f"{weights} + {RUNTIME_RESERVE:g} GiB reserve = {floor.needed_gib:.1f} GiB, but {have} "
            f"(allowed: max_model_len up to about {max(tokens, 0)}, or more GPUs per engine)",
        )
    kv = f" + {floor.kv_gib:.1f} GiB KV cache for one {engine.max_model_len}-token sequence" if floor.kv_gib else ""
    gpus_needed = math.ceil(floor.needed_gib / (floor.gpu_gib * engine.gpu_memory_utilization))
    # the least TP that holds the weights and that the model's heads split into (3 GPUs may call for TP 4)
    tp = next((n for n in tp_sizes(cfg.serving.model.source, gpu.gpus) if n >= gpus_needed), None)
    hint = (
        f"tensor_parallel_size {tp} or more"
        if tp
        else f"at least {gpus_needed} GPUs per engine (tensor_parallel_size) on a GPU type with that many per node"
    )
    raise ConfigError(
        path,
        "serving.model.source",
        f"{cfg.serving.model.source} needs at least {floor.needed_gib:.1f} GiB per engine ({weights}"
        f"{kv} + {RUNTIME_RESERVE:g} GiB reserve), but {have} (allowed: a smaller or quantized model, "
        f"or {hint}; set serving.model.parameters_billion if the size is wrong)",
    )


# --- serving.model.source -----------------------------------------------------------------------------------
# A Hugging Face repo id (`namespace/name`, as huggingface_hub's validate_repo_id takes it, the namespace
# required): no local path, s3:// or other URL, since the Ray pods can load none of them.
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".
HF_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?")


def model_source(cfg: StageConfig, path: str) -> None:
    source = cfg.serving.model.source
    field = "serving.model.source"
    allowed = "allowed: a Hugging Face repo id, org/name, e.g. Qwen/Qwen3.5-9B"
    if source.startswith("s3://"):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is an S3 URI, but no stack grants the Ray pods read "
            "access to S3 (their role reads only the Hugging Face token's secret), so "
            f"vLLM could not load it ({allowed})",
        )
    if source.startswith(("/", "./", "../", "~", "file:")):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is a local path: the Ray worker pods have no such "
            "folder (only the weight cache, where the weights download to) "
            f"({allowed})",
        )
    parts = source.split("/")
    if (
        len(parts) != 2
        or not all(HF_PART.fullmatch(part) for part in parts)
        or "--" in source
        or ".." in source
        or source.endswith(".git")
    ):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is not a Hugging Face repo id ({allowed}; each part 1 "
            "to 96 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            "no '--' or '..', not ending in .git)",
        )


# --- serving.hf_token_secret for a gated model ----------------------------------------------------------------
# A gated repository (config/derived.py KNOWN_MODELS, gated_org) answers a download without a token of an account
# that accepted its licence with 401/403: without serving.hf_token_secret the pods start, vLLM fails to fetch the
# config and the RayService never becomes ready. Refused here, before anything is built.
TOKEN_DOC = 'docs/OPERATIONS.md, "Hugging Face token secret"'


def model_access(cfg: StageConfig, path: str) -> None:
    serving = cfg.serving
    if is_gated(serving.model.source) and not serving.hf_token_secret:
        raise ConfigError(
            path,
            "serving.hf_token_secret",
            f"unset, but {serving.model.source} is a gated Hugging Face model: its download is refused without "
            "the token of an account that accepted its licence on the model page (allowed: the name or ARN of the "
            f"Secrets Manager secret that holds such a token, e.g. pd-inference/hf-token; {TOKEN_DOC} creates it)",
        )


# --- serving.model.id against serving.model.source (a warning) ---------------------------------------------------
# Warned about when the id, normalised (lower case, a-z and 0-9 only), is neither the source's repository name
# nor organisation + name: one line on stderr, the exit code unchanged (docs/STAGE_FILE.md, serving.model).
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".


def normalised_model_name(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def model_id_mismatch(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when serving.model.id names another model than serving.model.source, else None."""
    model = cfg.serving.model
    org, _, name = model.source.rstrip("/").rpartition("/")
    wanted = normalised_model_name(model.id)
    if wanted in (normalised_model_name(name), normalised_model_name(org + name)):
        return None
    return (
        "serving.model.id",
        (
            f"{short(model.id, 80)} names another model than serving.model.source {short(model.source, 80)} "
            f"(compared in lower case, letters and digits only: {short(wanted, 60)} vs "
            f"{short(normalised_model_name(name), 60)}): clients asking for {short(model.id, 80)} get "
            f"{short(name, 80)} (fix: id: {short(name.lower(), 80)}; keep the id if the alias is on purpose)"
        ),
    )
