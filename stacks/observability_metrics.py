"""The metric names the real stack exports, from the rehearsal's scrape (Ray 2.58.0 / vLLM 0.26.0 on a GPU):
docs/rehearsal/2026-11-30-h200-pd/metrics-pd.txt, one series name a line as the Prometheus TYPE lines give
them. The dashboard, the alarms and the scrape filter take their Ray and vLLM names from here, and the tests
fail when one is not in that file. The file lists names only (no types, no labels)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

REHEARSAL_METRICS = Path(__file__).resolve().parent.parent / "docs" / "rehearsal" / "2026-11-30-h200-pd" / "metrics-pd.txt"

# Histograms (vLLM's and Ray Serve's, per their source): the CloudWatch agent's Prometheus-to-EMF path drops
# histograms, so these go over OTLP (PromQL) instead; everything else here is a counter or a gauge.
HISTOGRAMS = (
    "ray_vllm_time_to_first_token_seconds", "ray_vllm_inter_token_latency_seconds",
    "ray_vllm_e2e_request_latency_seconds", "ray_vllm_nixl_xfer_time_seconds", "ray_vllm_nixl_bytes_transferred",
)
# Counters and gauges shipped as CloudWatch metrics (EMF) for the dashboard and the alarms, by the label
# that is their second dimension (beside ClusterName): one EMF declaration per group.
EMF_METRICS_BY_DIMENSION = {
    "status_class": ("ray_serve_num_http_requests_total", "ray_serve_num_ongoing_http_requests"),
    "deployment": ("ray_serve_deployment_queued_queries", "ray_serve_replica_processing_queries",
                   "ray_serve_deployment_replica_healthy", "ray_serve_autoscaling_target_replicas"),
    "pod_name": ("ray_vllm_num_requests_running", "ray_vllm_num_requests_waiting", "ray_vllm_kv_cache_usage_perc",
                 "ray_vllm_prompt_tokens_cached_total", "ray_vllm_prompt_tokens_total",
                 "ray_vllm_generation_tokens_total"),
}
EMF_METRICS = tuple(name for names in EMF_METRICS_BY_DIMENSION.values() for name in names)


@lru_cache(maxsize=1)
def exported() -> frozenset[str]:
    """Every series name of the rehearsal's scrape."""
    return frozenset(line.strip() for line in REHEARSAL_METRICS.read_text().splitlines() if line.strip())


def check(name: str) -> str:
    """`name`, if the real stack exports it; a KeyError naming the file otherwise."""
    if name not in exported():
        raise KeyError(f"{name} is not exported by Ray 2.58.0 / vLLM 0.26.0 ({REHEARSAL_METRICS.name})")
    return name
