"""Rules of the `serving.engine` section (docs/STAGE_FILE.md), on every engine the mode runs: the GDN prefill
kernel on Hopper, the engine arguments that need an opt-in, pinned revisions, one identity for both PD roles, TP
sizes that pair, and CUDA graphs. The classes of the arguments: config/engine_arg_classes.py."""

from __future__ import annotations

from typing import Any

from ..derived import (
    gpu_spec,
)
from ..engine_arg_classes import (
    COMMIT_ID,
    ENGINE_ARGS_OPT_IN,
    IDENTITY_ARGS,
    NIXL_CHECKS,
    NIXL_SILENT,
    PINNED_REVISIONS,
    enables,
    engine_arg_class,
)
from ..engine_args import SM90_GPUS, is_gdn_model, model_key
from ..errors import ConfigError, short
from ..schema import StageConfig
from .serving_engine_tuning import MODEL_HEADS


def gdn_prefill_kernel(cfg: StageConfig, path: str) -> None:
    """A Gated-DeltaNet model (Qwen3.5) on Hopper GPUs needs the Triton GDN prefill kernel: FlashInfer's
    SM90 kernel is missing in vLLM 0.26 and every request dies (seen on an H200: docs/REHEARSAL.md, the gdn_prefill_backend override).
    Checked for every engine the mode runs (a PD role with its own engine block as it runs)."""
    gpu = gpu_spec(cfg).gpu_model
    serving = cfg.serving
    for role in serving.engine_roles():
        backend = serving.engine_for(role).gdn_prefill_backend
        if gpu in SM90_GPUS and is_gdn_model(serving.model.source) and backend in (None, "flashinfer"):
            raise ConfigError(
                path,
                serving.engine_field(role, "gdn_prefill_backend"),
                f"{backend or 'unset (FlashInfer)'} on {gpu} ({cfg.gpu_nodegroup.instance_type}) with "
                f"{serving.model.source}: FlashInfer's SM90 GDN prefill kernel is unavailable in "
                f"vLLM 0.26 and every request fails (allowed: triton)",
            )


def cuda_graph_mode(cfg: StageConfig, path: str) -> None:
    """serving.engine.cuda_graphs chooses graphs, so it needs enforce_eager: false, and it sets the capture size
    itself (max_num_seqs) inside compilation_config: vLLM refuses a capture size given both there and as an
    engine argument (vllm/engine/arg_utils.py, create_engine_config: "... are mutually exclusive"), so
    extra_args' capture arguments are refused beside it. Per engine as it runs."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        if engine.cuda_graphs is None:
            continue
        field = serving.engine_field(role, "cuda_graphs")
        if engine.enforce_eager:
            raise ConfigError(
                path,
                field,
                f"{engine.cuda_graphs} with enforce_eager: true, which captures no CUDA graphs (allowed: "
                "enforce_eager: false, or leave cuda_graphs out)",
            )
        for name in ("max_cudagraph_capture_size", "cudagraph_capture_sizes"):
            if name in engine.extra_args:
                raise ConfigError(
                    path,
                    field,
                    f"{engine.cuda_graphs} captures graphs up to max_num_seqs, and extra_args.{name} says otherwise "
                    f"(allowed: one of the two; set max_num_seqs for the capture size)",
                )


def unsafe_engine_args(cfg: StageConfig, path: str) -> None:
    """An opt-in argument in extra_args needs its name in serving.allow_unsafe_engine_args; that list names
    opt-in arguments only, each once, and only ones extra_args sets."""
    serving = cfg.serving
    listed = list(serving.allow_unsafe_engine_args)
    opt_in = ", ".join(sorted(ENGINE_ARGS_OPT_IN))
    # Every engine the mode runs, a PD role with its own engine block as it runs (its extra_args merged).
    engines = [(role, serving.engine_for(role)) for role in serving.engine_roles()]
    where = (
        "serving.engine.extra_args"
        if all(engine is serving.engine for _, engine in engines)
        else "the extra_args of serving.engine, serving.prefill.engine or serving.decode.engine"
    )
    for index, name in enumerate(listed):
        field = f"serving.allow_unsafe_engine_args[{index}]"
        kind, why = engine_arg_class(name)
        if kind != "opt-in":  # `name` has ENGINE_ARG's characters only: printed as it is
            reason = (
                "is not an opt-in engine argument"
                if kind == "unclassified"
                else f"is reserved ({why}): no stage file may pass it"
                if kind == "reserved"
                else "needs no opt-in: extra_args takes it as it is"
            )
            raise ConfigError(path, field, f"{name} {reason} (allowed: {opt_in})")
        if name in listed[:index]:
            raise ConfigError(path, field, f"{name} is listed twice (each once)")
        if not any(enables(engine.extra_args.get(name)) for _, engine in engines):
            raise ConfigError(
                path,
                field,
                f"{name} is not turned on in {where}: an opt-in that "
                "opens nothing (allowed: only the opt-in arguments extra_args sets)",
            )
    for role, engine in engines:
        for name, value in engine.extra_args.items():
            if name in ENGINE_ARGS_OPT_IN and enables(value) and name not in listed:
                raise ConfigError(
                    path,
                    serving.engine_field(role, f"extra_args.{name}"),
                    f"{short(value)}: {name} {ENGINE_ARGS_OPT_IN[name]} (allowed: only with "
                    f"serving.allow_unsafe_engine_args: [{name}], which synth reports as a warning)",
                )


def _runs(engine: Any, name: str) -> Any:
    """The value `engine` runs `name` with: its typed field, its extra argument, or None (vLLM's default)."""
    return getattr(engine, name) if name in type(engine).model_fields else engine.extra_args.get(name)


def _key(engine: Any, name: str) -> str:
    return name if name in type(engine).model_fields else f"extra_args.{name}"


def pinned_revisions(cfg: StageConfig, path: str) -> None:
    """revision, code_revision and tokenizer_revision name a commit (COMMIT_ID), in every engine the mode runs."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        for name in PINNED_REVISIONS:
            value = engine.extra_args.get(name)
            if value is None or (isinstance(value, str) and COMMIT_ID.fullmatch(value)):
                continue
            raise ConfigError(
                path,
                serving.engine_field(role, f"extra_args.{name}"),
                f"{short(value)} is not a commit id: a branch or tag (main, v1.0) moves when the repository "
                "changes, and refs/pr/N is a Hub pull request anyone can open, with weights, config and chat "
                f"template of its own, served under serving.model.id {short(serving.model.id)} (allowed: a full "
                f"commit id of {short(serving.model.source, 80)}, 40 lower-case hex digits; or leave {name} out)",
            )


def role_identity(cfg: StageConfig, path: str) -> None:
    """In PD mode prefill and decode run one value of every IDENTITY_ARGS setting (typed field or extra argument):
    the field named is the role block that sets it (prefill first)."""
    serving = cfg.serving
    if serving.mode != "pd":
        return
    prefill, decode = serving.engine_for("prefill"), serving.engine_for("decode")
    for name, what in IDENTITY_ARGS.items():
        ours, theirs = _runs(prefill, name), _runs(decode, name)
        if ours == theirs and type(ours) is type(theirs):
            continue
        key = _key(prefill, name)
        fields = [serving.engine_field(role, key) for role in ("prefill", "decode")]
        field = next(f for f in fields if not f.startswith("serving.engine."))
        unset = "unset (vLLM's default)"
        raise ConfigError(
            path,
            field,
            f"prefill runs {unset if ours is None else short(ours)}, decode {unset if theirs is None else short(theirs)}:"
            f" {name} decides {what}, and a request prefilled by one is decoded by the other from the KV cache NIXL "
            f"moves, {NIXL_CHECKS.get(name, NIXL_SILENT)} (allowed: one value for both roles, set in "
            f"serving.engine.{key})",
        )


def role_tp_pairing(cfg: StageConfig, path: str) -> None:
    """In PD mode the decode engine's TP ranks read the prefill engine's KV cache rank by rank, so two different TP
    sizes must pair: the larger a multiple of the smaller, and for a hybrid (GDN) model at most its KV heads each.
    Both are refused by vLLM only when the first request arrives. Why: docs/DECISIONS.md, "Tensor parallel inside
    a node, and heterogeneous TP"."""
    serving = cfg.serving
    if serving.mode != "pd":
        return
    tp = {role: serving.engine_for(role).tensor_parallel_size for role in ("prefill", "decode")}
    if tp["prefill"] == tp["decode"]:
        return
    small, large = sorted(tp.values())
    fields = [serving.engine_field(role, "tensor_parallel_size") for role in tp]
    field = next(f for f in fields if not f.startswith("serving.engine."))
    pair = f"prefill {tp['prefill']}, decode {tp['decode']}"
    if large % small:
        # vllm/distributed/kv_transfer/kv_connector/utils.py TransferTopology.tp_ratio asserts the division.
        raise ConfigError(
            path,
            field,
            f"{pair}: each decode rank reads its part of the KV cache from whole prefill ranks, and NIXL's "
            "handshake refuses TP sizes where neither divides the other (allowed: equal sizes, or one a multiple "
            "of the other)",
        )
    heads = MODEL_HEADS.get(model_key(serving.model.source))
    if heads is not None and is_gdn_model(serving.model.source) and large > heads[1]:
        # vllm/platforms/interface.py _align_hybrid_block_size sizes the block from the GDN state per rank over the
        # KV per token per rank; nixl/base_worker.py _validate_remote_agent_handshake: "HMA does not support
        # different remote block size yet".
        raise ConfigError(
            path,
            field,
            f"{pair}: {short(serving.model.source, 80)} has {heads[1]} KV heads and Gated DeltaNet layers; above "
            f"{heads[1]} ranks the KV heads are copied while the recurrent state still splits, so the two engines "
            f"size their cache blocks differently and NIXL's handshake refuses them (allowed: equal sizes, or "
            f"different sizes of at most {heads[1]})",
        )
