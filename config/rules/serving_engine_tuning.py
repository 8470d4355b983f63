"""The counted engine arguments of `serving.engine` and the role engine blocks (config/engine_arg_classes.py
COUNTED_ARGS) against the model, the GPUs and the pod: parallel layout, memory and scheduler limits."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..derived import (
    GIB,
    RUNTIME_RESERVE_GIB,
    efa_pinned_gib,
    gpu_spec,
    model_memory_floor,
    worker_resources,
)
from ..engine_args import model_key
from ..errors import ConfigError, short
from ..schema import StageConfig

# --- Tuning arguments against the model, the GPUs and the pod (config/engine_arg_classes.py COUNTED_ARGS) ---
# The (query heads, KV heads) of the models whose config.json is known, keyed like KNOWN_MODELS; all dense.
# A model not here is not checked. Qwen3.5's are their committed config.json's (serving_lab/pins/qwen3.5-*-config.json,
# tests/config/test_engine_identity.py).
# Why: docs/DECISIONS.md, "Engine arguments by what they mean".
_LLAMA_8B = ("llama-3.1-8b", "llama-3.1-8b-instruct", "meta-llama-3.1-8b", "meta-llama-3.1-8b-instruct")
_LLAMA_70B = ("llama-3.1-70b", "llama-3.1-70b-instruct", "meta-llama-3.1-70b", "meta-llama-3.1-70b-instruct")
MODEL_HEADS: dict[str, tuple[int, int]] = {
    "qwen3.5-9b": (16, 4),
    "qwen3.5-27b": (24, 4),
    **dict.fromkeys(_LLAMA_8B, (32, 8)),
    **dict.fromkeys(_LLAMA_70B, (64, 8)),
}


def _splits_heads(tp: int, heads: tuple[int, int]) -> bool:
    # vllm/config/model.py verify_with_parallel_config: "Total number of attention heads (...) must be divisible by
    # tensor parallel size"; vllm/model_executor/layers/linear.py QKVParallelLinear: KV heads split over TP, or
    # replicated when TP is the larger (num_kv_head_replicas = divide(tp_size, total_num_kv_heads)).
    query, kv = heads
    return not query % tp and not (kv % tp if tp < kv else tp % kv)


def tp_sizes(source: str, most: int) -> list[int]:
    """The tensor_parallel_size values up to `most` that vLLM accepts for the model (all when its heads are unknown)."""
    heads = MODEL_HEADS.get(model_key(source))
    return [n for n in range(1, most + 1) if heads is None or _splits_heads(n, heads)]


def _number(args: Mapping[str, object], name: str, default: float | None = None) -> float | None:
    """A numeric engine argument: the schema holds each extra_args value to its vLLM type, so a set one is a
    number here; unset, `default`."""
    value = args.get(name, default)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _int(args: Mapping[str, object], name: str, default: int) -> int:
    value = args.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def parallel_layout(cfg: StageConfig, path: str) -> None:
    """Every engine's decode context parallel size within its TP ranks, and its TP (and DCP) within the model's
    heads, as vLLM checks them when the engine starts (on the GPU node, after the deploy)."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        tp, dcp = engine.tensor_parallel_size, _int(engine.extra_args, "decode_context_parallel_size", 1)
        dcp_field = serving.engine_field(role, "extra_args.decode_context_parallel_size")
        # vllm/config/parallel.py: "DCP reuses the TP ranks when PCP is disabled" (PCP is reserved here).
        if tp % dcp:  # DCP's range (1 or more) is config/engine_arg_ranges.py's
            raise ConfigError(
                path,
                dcp_field,
                f"{dcp} with tensor_parallel_size {tp}: the decode context parallel ranks are the engine's TP ranks, "
                f"so vLLM refuses a size that does not divide TP (allowed: "
                f"{', '.join(str(n) for n in range(1, tp + 1) if not tp % n)})",
            )
        heads = MODEL_HEADS.get(model_key(serving.model.source))
        if heads is not None:
            _heads_divide(cfg, path, role, tp, dcp, heads)
        _experts(cfg, path, role, dense=heads is not None)


def _experts(cfg: StageConfig, path: str, role: str | None, *, dense: bool) -> None:
    """Expert parallel needs expert layers (vllm/config/model.py, _verify_with_expert_parallelism: "Number of experts
    in the model must be greater than 0"), which no model of MODEL_HEADS has; EPLB needs expert parallel
    (vllm/config/parallel.py: "enable_expert_parallel must be True to use EPLB")."""
    serving = cfg.serving
    args = serving.engine_for(role).extra_args
    expert_parallel = args.get("enable_expert_parallel") is True
    if dense and expert_parallel:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.enable_expert_parallel"),
            f"true, but {short(serving.model.source, 80)} is dense (no expert layers), and vLLM refuses expert "
            "parallel without experts (allowed: false, or leave it out)",
        )
    if args.get("enable_eplb") is True and not expert_parallel:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.enable_eplb"),
            "true without enable_expert_parallel: true: expert load balancing moves experts between expert-parallel "
            "ranks, and vLLM refuses it without them (allowed: false, or with enable_expert_parallel on an MoE model)",
        )


def _heads_divide(cfg: StageConfig, path: str, role: str | None, tp: int, dcp: int, heads: tuple[int, int]) -> None:
    serving, (query, kv) = cfg.serving, heads
    model = short(serving.model.source, 80)
    if not _splits_heads(tp, heads):
        sizes = tp_sizes(serving.model.source, gpu_spec(cfg).gpus)
        raise ConfigError(
            path,
            serving.engine_field(role, "tensor_parallel_size"),
            f"{tp}, but {model} has {query} attention heads and {kv} KV heads, which vLLM splits over the TP ranks "
            f"(KV heads replicated when TP is a multiple of them) and refuses to split unevenly "
            f"(allowed: {', '.join(map(str, sizes))})",
        )
    # vllm/config/model.py verify_with_parallel_config, DCP with GQA: TP above the KV heads, DCP at most TP // KV
    # heads, and the query heads per KV head divisible by DCP.
    if dcp > 1 and (tp <= kv or dcp > tp // kv or (query // kv) % dcp):
        most = [n for n in range(1, tp // kv + 1) if not tp % n and not (query // kv) % n] if tp > kv else [1]
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.decode_context_parallel_size"),
            f"{dcp} with tensor_parallel_size {tp}: {model} has {kv} KV heads, and vLLM's decode context parallel "
            f"needs TP above them, DCP at most TP // {kv} and dividing {query // kv} query heads per KV head "
            f"(allowed here: {', '.join(map(str, most))}; a larger DCP needs a larger TP)",
        )


def engine_memory(cfg: StageConfig, path: str) -> None:
    """What the counted memory arguments hold, per engine the mode runs: a fixed KV cache against the GPU, one
    sequence and the GpuMemory alarm; offloaded weights and the multimodal cache against the pod's memory limit."""
    for role in cfg.serving.engine_roles():
        _fixed_kv_cache(cfg, path, role)
        _kv_left(cfg, path, role)
        _pod_memory(cfg, path, role)
        _shm_cache(cfg, path, role)


def _fixed_kv_cache(cfg: StageConfig, path: str, role: str | None) -> None:
    serving = cfg.serving
    engine = serving.engine_for(role)
    fixed = _number(engine.extra_args, "kv_cache_memory_bytes")
    if fixed is None:
        return
    field, kv = serving.engine_field(role, "extra_args.kv_cache_memory_bytes"), fixed / GIB
    floor = model_memory_floor(cfg, engine)
    if floor is None or floor.gpu_gib <= 0:
        return  # a model of unknown size: nothing to count it against
    # vllm/config/cache.py: "Size of KV Cache per GPU in bytes ... (when not-None) ignores gpu_memory_utilization".
    weights, sequence, room = floor.weights_gib / floor.gpus, floor.kv_gib / floor.gpus, floor.gpu_gib
    if floor.needed_gib > floor.available_gib:
        return  # the weights and one sequence do not fit: serving_model.weights_fit says so, the first thing to fix
    if kv < sequence:  # vllm/v1/core/kv_cache_utils.py: "To serve at least one request with the model's max seq len"
        raise ConfigError(
            path,
            field,
            f"{fixed} bytes ({kv:.2f} GiB) per GPU hold less than one {engine.max_model_len}-token sequence "
            f"({sequence:.2f} GiB per GPU), and vLLM refuses to start (allowed: at least "
            f"{math.ceil(sequence * GIB)}, or a smaller max_model_len)",
        )
    held = weights + kv + RUNTIME_RESERVE_GIB
    if held > room:
        most = int((room - weights - RUNTIME_RESERVE_GIB) * GIB)
        raise ConfigError(
            path,
            field,
            f"{kv:.2f} GiB of KV cache + {weights:.1f} GiB of weights + {RUNTIME_RESERVE_GIB:g} GiB reserve = "
            f"{held:.1f} GiB per GPU, more than a GPU's {room:g} GiB: a fixed KV cache ignores "
            f"gpu_memory_utilization, so nothing else keeps it within the GPU (allowed: at most {max(most, 0)})",
        )
    _alarm_room(cfg, path, field, weights, kv, room)


def _alarm_room(cfg: StageConfig, path: str, field: str, weights: float, kv: float, room: float) -> None:
    """stacks/alarms.py GpuMemory fires above observability.gpu_memory_percent: memory held from the start makes it
    fire always (config/rules/observability.py alarm_thresholds judges gpu_memory_utilization the same way)."""
    threshold, percent = cfg.observability.gpu_memory_percent, (weights + kv) / room * 100
    if cfg.observability.enabled and percent >= threshold:
        most = int((room * threshold / 100 - weights) * GIB) - 1
        raise ConfigError(
            path,
            field,
            f"the weights and this fixed KV cache hold {percent:.0f}% of each GPU's memory from the start, at or "
            f"above observability.gpu_memory_percent {threshold:g}, so the GpuMemory alarm would always fire "
            f"(allowed: at most {max(most, 0)} bytes, or a higher gpu_memory_percent)",
        )


def _pod_memory(cfg: StageConfig, path: str, role: str | None) -> None:
    """One engine's pinned CPU memory within the Ray worker's limit: cpu_offload_gb per GPU (vllm/config/offload.py,
    "The space in GiB to offload to CPU, per GPU") and mm_processor_cache_gb per process, an API process and an
    engine core (vllm/config/multimodal.py: "duplicated for each API process and engine core process")."""
    serving = cfg.serving
    engine = serving.engine_for(role)
    offload, cache = (_number(engine.extra_args, name) for name in ("cpu_offload_gb", "mm_processor_cache_gb"))
    if offload is None and cache is None:
        return
    name = "cpu_offload_gb" if offload is not None else "mm_processor_cache_gb"
    offload, cache = offload or 0, 4 if cache is None else cache  # 4 GiB: vLLM's default cache
    efa = efa_pinned_gib(cfg)  # EFA's pinned buffers share the limit
    need, limit = offload * engine.tensor_parallel_size + cache * 2 + efa, worker_resources(cfg).memory_limit_gib
    if need > limit:  # each value's range (0 or more, finite) is config/engine_arg_ranges.py's
        raise ConfigError(
            path,
            serving.engine_field(role, f"extra_args.{name}"),
            f"cpu_offload_gb {offload:g} x {engine.tensor_parallel_size} GPUs + mm_processor_cache_gb {cache:g} x 2 "
            f"processes + EFA's buffers {efa} = {need:g} GiB of the Ray worker's memory for one engine, but its limit "
            f"is {limit} GiB (serving.worker_resources.memory_limit_gib) (allowed: together within the limit)",
        )


def scheduler_limits(cfg: StageConfig, path: str) -> None:
    """The batch limits of every engine against each other, as vLLM checks them at start (vllm/config/scheduler.py,
    verify_max_model_len): a step takes at least max_num_seqs tokens, and without chunked prefill a whole prompt."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        tokens, seqs = engine.max_num_batched_tokens, engine.max_num_seqs
        if tokens is None:
            continue  # vLLM's default fits both
        field = serving.engine_field(role, "max_num_batched_tokens")
        if seqs is not None and tokens < seqs:
            raise ConfigError(
                path,
                field,
                f"{tokens} tokens per step for {seqs} sequences ({serving.engine_field(role, 'max_num_seqs')}): vLLM "
                f"refuses fewer tokens than sequences (allowed: {seqs} or more)",
            )
        if engine.extra_args.get("enable_chunked_prefill") is False and tokens < engine.max_model_len:
            raise ConfigError(
                path,
                field,
                f"{tokens} tokens per step with enable_chunked_prefill: false, below max_model_len "
                f"{engine.max_model_len}: a prompt must fit one step, and vLLM refuses it (allowed: "
                f"{engine.max_model_len} or more, or chunked prefill on)",
            )


def _kv_left(cfg: StageConfig, path: str, role: str | None) -> None:
    """The KV cache left for requests after mm_ipc_gpu_memory_gb (vllm/config/multimodal.py: "carved out of the
    engine's KV-cache memory") and the watermark (vllm/config/scheduler.py: "Fraction of total KV cache blocks to
    keep free") holds one max_model_len sequence, or no request of that length is ever scheduled."""
    serving = cfg.serving
    engine = serving.engine_for(role)
    mark, carved = (_number(engine.extra_args, name) for name in ("watermark", "mm_ipc_gpu_memory_gb"))
    if mark is None and carved is None:
        return
    name = "watermark" if mark is not None else "mm_ipc_gpu_memory_gb"
    # each value's range (watermark 0 to below 1, the GiB 0 or more) is config/engine_arg_ranges.py's
    field, mark, carved = serving.engine_field(role, f"extra_args.{name}"), mark or 0, carved or 0
    floor = model_memory_floor(cfg, engine)
    if floor is None or not floor.kv_gib or floor.gpu_gib <= 0:
        return  # the architecture's KV size is unknown
    fixed = _number(engine.extra_args, "kv_cache_memory_bytes")
    room = fixed / GIB * floor.gpus if fixed else floor.available_gib - floor.weights_gib - RUNTIME_RESERVE_GIB
    left = (room - carved) * (1 - mark)
    if left < floor.kv_gib:
        raise ConfigError(
            path,
            field,
            f"({room:.2f} GiB of KV cache - mm_ipc_gpu_memory_gb {carved:g}) x (1 - watermark {mark:g}) = {left:.2f} "
            f"GiB left for requests, less than one {engine.max_model_len}-token sequence ({floor.kv_gib:.2f} GiB), so "
            "no request of that length is ever scheduled (allowed: smaller values, or a smaller max_model_len)",
        )


def _shm_cache(cfg: StageConfig, path: str, role: str | None) -> None:
    """mm_processor_cache_type shm keeps mm_processor_cache_gb (default 4) in /dev/shm (vllm/config/multimodal.py:
    "If `shm`, use shared memory FIFO cache"), a memory-backed emptyDir of serving.worker_resources.shm_gib."""
    serving = cfg.serving
    args = serving.engine_for(role).extra_args
    if args.get("mm_processor_cache_type") != "shm":
        return
    cache, shm = _number(args, "mm_processor_cache_gb", 4) or 0, cfg.serving.worker_resources.shm_gib
    if cache > shm:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.mm_processor_cache_type"),
            f"shm puts mm_processor_cache_gb {cache:g} GiB in /dev/shm, larger than its {shm} GiB "
            "(serving.worker_resources.shm_gib) (allowed: lru, a smaller cache, or a larger shm_gib)",
        )
