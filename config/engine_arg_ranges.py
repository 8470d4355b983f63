"""The range of every numeric engine argument a stage may set (config/engine_arg_classes.py ENGINE_ARGS_ALLOWED):
the bound vLLM 0.26 states for it (a pydantic `Field(ge=..., gt=..., lt=...)` of its config class), or, where it
states none, what the code that reads the value needs. config/engine_args.py check_extra holds each value to it.

An allowlist: a numeric argument without a range here is refused (tests/config/test_safety_classes.py checks that
every allowed one has one), and no range holds NaN or an infinity (NaN compares false to every bound, so a check
written as `value < low` would pass it)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """low <= value (< when low_open) and value <= high (< when high_open); None: no bound that side."""

    low: float | None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    source: str = ""

    def holds(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def __str__(self) -> str:
        low = "" if self.low is None else f"{'more than' if self.low_open else 'at least'} {self.low}"
        high = "" if self.high is None else f"{'less than' if self.high_open else 'at most'} {self.high}"
        return " and ".join(part for part in (low, high) if part) or "a finite number"


# Each argument's range and where vLLM 0.26 says so (the files under vllm/ of the pinned wheel).
ENGINE_ARG_RANGES: dict[str, Range] = {
    # pydantic bounds of the config classes
    "block_size": Range(1, source="vllm/config/cache.py, Field(gt=0)"),
    "mamba_block_size": Range(1, source="vllm/config/cache.py, Field(gt=0)"),
    "prefix_match_unit": Range(1, source="vllm/config/cache.py, Field(gt=0)"),
    "cpu_offload_gb": Range(0, source="vllm/config/offload.py, Field(ge=0)"),
    "dbo_decode_token_threshold": Range(0, source="vllm/config/parallel.py, Field(ge=0)"),
    "dbo_prefill_token_threshold": Range(0, source="vllm/config/parallel.py, Field(ge=0)"),
    "decode_context_parallel_size": Range(1, source="vllm/config/parallel.py, Field(ge=1)"),
    "max_parallel_loading_workers": Range(1, source="vllm/config/parallel.py, Field(ge=1)"),
    "ubatch_size": Range(0, source="vllm/config/parallel.py, Field(ge=0)"),
    "kv_cache_metrics_sample": Range(0, 1, low_open=True, source="vllm/config/observability.py, Field(gt=0, le=1)"),
    "long_prefill_token_threshold": Range(0, source="vllm/config/scheduler.py, Field(ge=0)"),
    "max_long_partial_prefills": Range(1, source="vllm/config/scheduler.py, Field(ge=1)"),
    "max_num_partial_prefills": Range(1, source="vllm/config/scheduler.py, Field(ge=1)"),
    "max_num_scheduled_tokens": Range(0, source="vllm/config/scheduler.py, Field(ge=0)"),
    "prefill_schedule_interval": Range(1, source="vllm/config/scheduler.py, Field(ge=1)"),
    "stream_interval": Range(1, source="vllm/config/scheduler.py, Field(ge=1)"),
    "watermark": Range(0, 1, high_open=True, source="vllm/config/scheduler.py, Field(ge=0.0, lt=1.0)"),
    "max_logprobs": Range(-1, source="vllm/config/model.py, Field(ge=-1)"),
    "mm_encoder_fp8_scale_save_margin": Range(0, low_open=True, source="vllm/config/multimodal.py, Field(gt=0.0)"),
    "mm_ipc_gpu_memory_gb": Range(0, source="vllm/config/multimodal.py, Field(ge=0)"),
    "mm_processor_cache_gb": Range(0, source="vllm/config/multimodal.py, Field(ge=0)"),
    "mm_shm_cache_max_object_size_mb": Range(0, source="vllm/config/multimodal.py, Field(ge=0)"),
    "video_pruning_rate": Range(0, 1, high_open=True, source="vllm/config/multimodal.py, Field(ge=0.0, lt=1.0)"),
    "safetensors_prefetch_block_size": Range(1, source="vllm/config/load.py, Field(ge=1)"),
    "safetensors_prefetch_num_threads": Range(1, source="vllm/config/load.py, Field(ge=1)"),
    "shutdown_timeout": Range(0, source="vllm/config/vllm.py, Field(ge=0)"),
    # no pydantic bound: what the code that reads the value needs
    "cp_kv_cache_interleave_size": Range(1, source="vllm/config/vllm.py: block_size must be divisible by it"),
    "dcp_kv_cache_interleave_size": Range(1, source="vllm/config/vllm.py: it replaces cp_kv_cache_interleave_size"),
    "distributed_timeout_seconds": Range(1, source="vllm/distributed/utils.py: a timedelta for torch.distributed"),
    "cpu_distributed_timeout_seconds": Range(1, source="vllm/distributed/utils.py: a timedelta for gloo groups"),
    "kv_cache_memory_bytes": Range(1, source="vllm/config/cache.py: the KV cache's bytes per GPU"),
    "max_cudagraph_capture_size": Range(0, source="vllm/config/vllm.py: 0 when no graph is captured"),
    "mamba_cache_philox_rounds": Range(0, source="vllm/config/mamba.py: 0 uses the Triton default"),
    "renderer_num_workers": Range(1, source="vllm/renderers/base.py: ThreadPoolExecutor(max_workers=...)"),
    "seed": Range(0, 2**32 - 1, source="vllm/utils/torch_utils.py set_random_seed: numpy.random.seed's range"),
}


def range_problem(name: str, value: float) -> str | None:
    """None when `value` is within `name`'s range, else the one-line reason (a NaN or infinity never is)."""
    allowed = ENGINE_ARG_RANGES.get(name)
    if allowed is None:
        return f"{name}: no range is recorded for this numeric argument (allowed: leave it out)"
    if allowed.holds(value):
        return None
    what = "not a finite number" if not math.isfinite(value) else f"outside vLLM's range ({allowed.source})"
    return f"{name}: {value!r} is {what} (allowed: {allowed})"
