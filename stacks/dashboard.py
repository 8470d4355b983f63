"""The stage's CloudWatch dashboard: one row per question (docs/OBSERVABILITY.md renders it as text).
Per-node and per-pod series use SEARCH expressions (nodes and pods come and go); every metric name in them
is checked against the names the real stack exports (stacks/observability_metrics.py) or is a Container
Insights metric."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from config.topology import CONTAINER_INSIGHTS_NAMESPACE, RAY_METRICS_NAMESPACE

from .alarms import kv_rate, quantile_query, ray_metric
from .observability_metrics import check

WIDTH, HEIGHT = 8, 6
PERIOD = cdk.Duration.minutes(1)


def search(namespace: str, dimensions: list[str], metric: str, cluster_name: str, statistic: str) -> cw.MathExpression:
    schema = ",".join([namespace, *dimensions])
    return cw.MathExpression(
        expression=f'SEARCH(\'{{{schema}}} MetricName="{metric}" ClusterName="{cluster_name}"\', '
        f"'{statistic}', {PERIOD.to_seconds()})",
        label="",
        period=PERIOD,
    )


def ray_search(name: str, by: str, cluster_name: str, statistic: str = "Average") -> cw.MathExpression:
    return search(RAY_METRICS_NAMESPACE, ["ClusterName", by], check(name), cluster_name, statistic)


def node_search(name: str, cluster_name: str) -> cw.MathExpression:
    return search(
        CONTAINER_INSIGHTS_NAMESPACE, ["ClusterName", "InstanceId", "NodeName"], name, cluster_name, "Average"
    )


def per_deployment(name: str, cluster_name: str, statistic: str = "Average") -> list[cw.IMetric]:
    """One line per Serve deployment (Prefill:<model>, Decode:<model>, the ingress), found by SEARCH: the
    dashboard does not name the model, so a model change stays in the serving stack."""
    return [ray_search(name, "deployment", cluster_name, statistic)]


def traffic_row(cluster_name: str, alarms: dict) -> list[cw.IWidget]:
    """Requests by status class, in flight, and the 5xx alarm."""
    return [
        cw.GraphWidget(
            title="Requests by status class (per minute)",
            width=WIDTH,
            height=HEIGHT,
            left=[ray_search("ray_serve_num_http_requests_total", "status_class", cluster_name, "Sum")],
        ),
        cw.GraphWidget(
            title="Requests in flight",
            width=WIDTH,
            height=HEIGHT,
            left=[ray_metric("ray_serve_num_ongoing_http_requests", cluster_name, "Sum")],
        ),
        cw.AlarmWidget(title="5xx share of requests", width=WIDTH, height=HEIGHT, alarm=alarms["Http5xx"]),
    ]


def latency_row(cluster_name: str, ttft_slo: float, alarms: dict) -> list[cw.IWidget]:
    """The TTFT alarm and the latency queries CDK dashboards cannot graph."""
    latency_queries = "\n".join(
        f"- {what} p{q}: `{quantile_query(metric, cluster_name, f'0.{q}')}`"
        for what, metric in (
            ("TTFT", "ray_vllm_time_to_first_token_seconds"),
            ("ITL", "ray_vllm_inter_token_latency_seconds"),
            ("E2E", "ray_vllm_e2e_request_latency_seconds"),
        )
        for q in ("50", "99")
    )
    return [
        cw.AlarmWidget(title=f"TTFT p99 (SLO {ttft_slo:g} s)", width=WIDTH, height=HEIGHT, alarm=alarms["TtftP99"]),
        cw.TextWidget(
            width=2 * WIDTH,
            height=HEIGHT,
            markdown=(
                "### TTFT / ITL / E2E p50 and p99 (PromQL, Query Studio)\nThe latency histograms arrive over OTLP; "
                "CloudWatch dashboards built by CDK have no PromQL graph, so the queries are here:\n" + latency_queries
            ),
        ),
    ]


def deployment_row(cluster_name: str) -> list[cw.IWidget]:
    """Prefill against decode, one line per Serve deployment."""
    return [
        cw.GraphWidget(
            title="Queued requests: prefill vs decode",
            width=WIDTH,
            height=HEIGHT,
            left=per_deployment("ray_serve_deployment_queued_queries", cluster_name),
        ),
        cw.GraphWidget(
            title="Processing requests: prefill vs decode",
            width=WIDTH,
            height=HEIGHT,
            left=per_deployment("ray_serve_replica_processing_queries", cluster_name, "Sum"),
        ),
        cw.GraphWidget(
            title="Target replicas: prefill vs decode",
            width=WIDTH,
            height=HEIGHT,
            left=per_deployment("ray_serve_autoscaling_target_replicas", cluster_name, "Maximum"),
        ),
    ]


def node_row(cluster_name: str) -> list[cw.IWidget]:
    """GPU use per node and the engines' request queues per pod."""
    return [
        cw.GraphWidget(
            title="GPU utilization % per node",
            width=WIDTH,
            height=HEIGHT,
            left=[node_search("node_gpu_utilization", cluster_name)],
        ),
        cw.GraphWidget(
            title="GPU memory used % per node",
            width=WIDTH,
            height=HEIGHT,
            left=[node_search("node_gpu_memory_utilization", cluster_name)],
        ),
        cw.GraphWidget(
            title="Engine requests running / waiting per pod",
            width=WIDTH,
            height=HEIGHT,
            left=[ray_search("ray_vllm_num_requests_running", "pod_name", cluster_name)],
            right=[ray_search("ray_vllm_num_requests_waiting", "pod_name", cluster_name)],
        ),
    ]


def efa_row(cluster_name: str, alarms: dict) -> list[cw.IWidget]:
    """EFA traffic per node and every alarm's state."""
    return [
        cw.GraphWidget(
            title="EFA bytes received per node",
            width=WIDTH,
            height=HEIGHT,
            left=[node_search("node_efa_rx_bytes", cluster_name)],
        ),
        cw.GraphWidget(
            title="EFA bytes sent per node",
            width=WIDTH,
            height=HEIGHT,
            left=[node_search("node_efa_tx_bytes", cluster_name)],
        ),
        cw.AlarmStatusWidget(title="Alarms", width=WIDTH, height=HEIGHT, alarms=list(alarms.values())),
    ]


def kv_rate_widget(cluster_name: str, floor_gbps: float, width: int) -> cw.IWidget:
    """The KV transfer rate per transfer (the KvTransferSlow alarm's expression, 0 in a period without
    transfers) against the stage's floor."""
    return cw.GraphWidget(
        title="KV transfer Gbps per transfer (0: no transfer)",
        width=width,
        height=HEIGHT,
        left=[kv_rate(cluster_name, when_idle=0)],
        left_annotations=[cw.HorizontalAnnotation(value=floor_gbps, label=f"floor {floor_gbps:g} Gbps")],
    )


def kv_row(cluster_name: str, kv_floor_gbps: float | None = None) -> list[cw.IWidget]:
    """KV-cache use, prefix-cache hits, the KV transfer queries, and in PD mode the KV transfer rate."""
    width = WIDTH if kv_floor_gbps is None else WIDTH * 3 // 4
    rate = [] if kv_floor_gbps is None else [kv_rate_widget(cluster_name, kv_floor_gbps, width)]
    return [
        cw.GraphWidget(
            title="KV-cache usage per pod (0-1)",
            width=width,
            height=HEIGHT,
            left=[ray_search("ray_vllm_kv_cache_usage_perc", "pod_name", cluster_name)],
        ),
        cw.GraphWidget(
            title="Prefix-cache hit rate %",
            width=width,
            height=HEIGHT,
            left=[
                cw.MathExpression(
                    expression="100 * hits / prompt",
                    label="cached prompt tokens %",
                    period=PERIOD,
                    using_metrics={
                        "hits": ray_metric("ray_vllm_prompt_tokens_cached_total", cluster_name, "Sum"),
                        "prompt": ray_metric("ray_vllm_prompt_tokens_total", cluster_name, "Sum"),
                    },
                )
            ],
        ),
        cw.TextWidget(
            width=width,
            height=HEIGHT,
            markdown=(
                "### KV transfer (NIXL, PromQL)\n"
                f"- time p99: `{quantile_query('ray_vllm_nixl_xfer_time_seconds', cluster_name, '0.99')}`\n"
                f'- bytes/s: `sum(rate({check("ray_vllm_nixl_bytes_transferred")}{{ClusterName="{cluster_name}"}}[5m]))`'
                "\n- transport: alarm NIXL not on EFA (worker logs)"
            ),
        ),
        *rate,
    ]


def rows(
    cluster_name: str, ttft_slo: float, alarms: dict, kv_floor_gbps: float | None = None
) -> list[list[cw.IWidget]]:
    return [
        traffic_row(cluster_name, alarms),
        latency_row(cluster_name, ttft_slo, alarms),
        deployment_row(cluster_name),
        node_row(cluster_name),
        efa_row(cluster_name, alarms),
        kv_row(cluster_name, kv_floor_gbps),
    ]


class StageDashboard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        ttft_slo: float,
        alarms: dict,
        kv_floor_gbps: float | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        widgets = rows(cluster_name, ttft_slo, alarms, kv_floor_gbps)
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.hours(3), widgets=widgets)
        self.dashboard_name = self.dashboard.dashboard_name  # CloudFormation's name, in the stack outputs
