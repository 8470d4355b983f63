"""Rules of the `observability` section (docs/STAGE_FILE.md): the alarm topic's region and account, and alarm
thresholds that can fire."""

from __future__ import annotations

from ..derived import gpu_spec
from ..errors import ConfigError
from ..schema import StageConfig
from .top_level import same_region_and_account


def alarm_topic(cfg: StageConfig, path: str) -> None:
    """CloudWatch alarm actions reach an SNS topic of the alarm's own region (and, with an account in the
    stage file, its own account: a topic elsewhere needs a policy this app does not manage)."""
    arn = cfg.observability.alarm_topic_arn
    if not arn:
        return
    same_region_and_account(
        cfg,
        path,
        "observability.alarm_topic_arn",
        arn,
        what="topic",
        region_reason=": CloudWatch alarms notify only topics of their own region",
        allowed_region=f"an SNS topic ARN in {cfg.region}",
        allowed_account=f"a topic of account {cfg.account}",
    )


# --- alarm thresholds that can never fire or always fire ----------------------------------------------
# vLLM 0.26's time-to-first-token histogram (vllm/v1/metrics/loggers.py, ray_vllm_time_to_first_token_seconds
# here): its buckets start at 1 ms and end at 2560 s. histogram_quantile cannot tell times within the first
# bucket apart, so an SLO under 1 ms fires even when every request is faster.
TTFT_SMALLEST_BUCKET_SECONDS = 0.001
# Memory a GPU holds outside vLLM's gpu_memory_utilization budget, which is measured from the engine's own
# baseline: the process's CUDA context, already there when vLLM reads the free memory (its log on the rehearsal
# H200: "Free memory on device (139.29/139.8 GiB) on startup", vllm/v1/worker/gpu_worker.py: 0.51 GiB). The
# node's GPU-memory metric counts it, so the alarm's threshold keeps twice that above the budget.
GPU_CONTEXT_GIB = 1.0


def _context_percent(cfg: StageConfig) -> float:
    """GPU_CONTEXT_GIB as a share of one GPU's memory (as the driver reports it, else as EC2 documents it)."""
    spec = gpu_spec(cfg)
    gpu_gib = spec.gpu_memory_mib / 1024 if spec.gpu_memory_mib else spec.gpu_memory_gib / spec.gpus
    return GPU_CONTEXT_GIB / gpu_gib * 100


def alarm_thresholds(cfg: StageConfig, path: str) -> None:
    """stacks/alarms.py: Http5xx fires when 100 * 5xx / requests > error_rate_percent, GpuMemory when a node's
    GPU memory used % > gpu_memory_percent, TtftP99 when the p99 time to first token > ttft_p99_slo_seconds."""
    obs, timeout = cfg.observability, cfg.benchmark.request_timeout_seconds
    if not 0 < obs.error_rate_percent < 100:
        raise ConfigError(
            path,
            "observability.error_rate_percent",
            f"{obs.error_rate_percent:g}: the alarm fires above it, and a share of requests is never "
            "above 100% (allowed: more than 0 and less than 100)",
        )
    # vLLM takes gpu_memory_utilization of each GPU's memory at start (weights and KV cache) and keeps it: at or
    # below that share the alarm fires as soon as the engine is up, and stays in alarm.
    # The most any engine the mode runs holds (a PD role with its own engine block as it runs; prefill on a tie).
    serving = cfg.serving
    shares = [(serving.engine_for(role).gpu_memory_utilization, role) for role in serving.engine_roles()]
    share = max(value for value, _ in shares)
    held, holder = share * 100, serving.engine_field(next(r for v, r in shares if v == share), "gpu_memory_utilization")
    held = round(held + _context_percent(cfg), 2)
    if not held < obs.gpu_memory_percent < 100:
        raise ConfigError(
            path,
            "observability.gpu_memory_percent",
            f"{obs.gpu_memory_percent:g}: "
            + (
                "the alarm fires above it, and a GPU's memory is never more than 100% used"
                if obs.gpu_memory_percent >= 100
                else f"vLLM and the CUDA context hold {held:g}% of each GPU's memory from the start "
                f"({holder} and {GPU_CONTEXT_GIB:g} GiB outside its budget), so the alarm would always fire"
            )
            + f" (allowed: more than {held:g} and less than 100)",
        )
    slo = obs.ttft_p99_slo_seconds
    if not TTFT_SMALLEST_BUCKET_SECONDS <= slo < timeout:
        why = (
            f"below vLLM's smallest time-to-first-token bucket ({TTFT_SMALLEST_BUCKET_SECONDS:g} s), so the "
            "alarm fires however fast requests are"
            if slo < TTFT_SMALLEST_BUCKET_SECONDS
            else f"not below benchmark.request_timeout_seconds ({timeout}): a request waits no longer for its first "
            "token, so the alarm never fires"
        )
        raise ConfigError(
            path,
            "observability.ttft_p99_slo_seconds",
            f"{slo:g} s is {why} (allowed: {TTFT_SMALLEST_BUCKET_SECONDS:g} s or more, and less than {timeout} s)",
        )
