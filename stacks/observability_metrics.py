"""The Ray and vLLM metric names the stage ships to CloudWatch, as data the code owns: the dashboard, the
alarms and the scrape filter take their names from here, and `check` refuses any other at synth (a typo in a
metric name would otherwise be a dashboard that stays empty). Synth reads no file for it.

That each name is really exported by Ray 2.58.0 / vLLM 0.26.0 is checked in the tests against the real
stack's scrape, recorded by a GPU rehearsal (tests/stacks/test_observability.py, SCRAPE: the series names of
evidence/2026-11-30-h200-pd/metrics-pd.txt)."""

from __future__ import annotations

# Histograms (vLLM's and Ray Serve's, per their source): the CloudWatch agent's Prometheus-to-EMF path drops
# histograms, so these go over OTLP (PromQL) instead; everything else here is a counter or a gauge.
HISTOGRAMS = (
    "ray_vllm_time_to_first_token_seconds",
    "ray_vllm_inter_token_latency_seconds",
    "ray_vllm_e2e_request_latency_seconds",
    "ray_vllm_nixl_xfer_time_seconds",
    "ray_vllm_nixl_bytes_transferred",
)
# Counters and gauges shipped as CloudWatch metrics (EMF) for the dashboard and the alarms, by the label
# that is their second dimension (beside ClusterName): one EMF declaration per group.
EMF_METRICS_BY_DIMENSION = {
    "status_class": ("ray_serve_num_http_requests_total", "ray_serve_num_ongoing_http_requests"),
    "deployment": (
        "ray_serve_deployment_queued_queries",
        "ray_serve_replica_processing_queries",
        "ray_serve_deployment_replica_healthy",
        "ray_serve_autoscaling_target_replicas",
    ),
    "pod_name": (
        "ray_vllm_num_requests_running",
        "ray_vllm_num_requests_waiting",
        "ray_vllm_kv_cache_usage_perc",
        "ray_vllm_prompt_tokens_cached_total",
        "ray_vllm_prompt_tokens_total",
        "ray_vllm_generation_tokens_total",
    ),
}
EMF_METRICS = tuple(name for names in EMF_METRICS_BY_DIMENSION.values() for name in names)


SHIPPED = frozenset(HISTOGRAMS + EMF_METRICS)

# NIXL's own Prometheus exporter on the PD workers (charts/worker_env.py), the scrape job `nixl`: counters, whose
# names end in _total (ai-dynamo/nixl src/plugins/telemetry/prometheus/README.md, "Metrics & Events"), shipped
# as CloudWatch metrics (EMF, dimensions ClusterName and pod_name) for the KV transfer rate's alarm and widget.
# The CloudWatch agent sends a counter's increase since its previous scrape (AWS, "Prometheus metric type
# conversion by the CloudWatch agent"), so a Sum over a period is the period's bytes and microseconds.
NIXL_METRICS = ("agent_rx_bytes_total", "agent_xfer_time_total", "agent_rx_requests_num_total")


def check(name: str) -> str:
    """`name`, if it is one of the shipped metrics; a KeyError naming this module otherwise."""
    if name not in SHIPPED and name not in NIXL_METRICS:
        raise KeyError(
            f"{name} is not a shipped metric (stacks/observability_metrics.py: HISTOGRAMS, EMF_METRICS_BY_DIMENSION, "
            "NIXL_METRICS)"
        )
    return name
