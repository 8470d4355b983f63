"""The stage's alarms (docs/OBSERVABILITY.md has the list and thresholds), notifying the stage file's SNS
topic when it names one. The NIXL alarm is built only where the GPU nodegroup has EFA: it fires on a
line of the workers' log relay (charts/log_relay.py) that shows NIXL moving the KV cache over something
else (stacks/log_patterns.py's terms, scoped to the relay's container by `relay_filter_pattern`). The KV rate
alarm is built where the stage runs PD: the rate per transfer, from NIXL's own exporter, under the stage's
floor (config/derived.py kv_transfer_floor_gbps) while transfers happen."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from charts.log_relay import CONTAINER as RELAY_CONTAINER
from config.schema import Observability
from config.topology import CONTAINER_INSIGHTS_NAMESPACE, RAY_METRICS_NAMESPACE

from .log_patterns import NIXL_NOT_ON_EFA, parse
from .observability_metrics import check

NIXL_METRIC = "NixlNotOnEfa"


def relay_filter_pattern(pattern: str) -> logs.IFilterPattern:
    """`pattern`'s terms (stacks/log_patterns.py) as a JSON filter pattern that reads only the worker log
    relay's events: Fluent Bit's kubernetes filter puts the container's name in `kubernetes.container_name`
    and its line in `log` (the add-on chart 6.4.0's application-log.conf in values.yaml: Labels and
    Annotations off, a JSON line merged under `log_processed`, so `log` stays), and the relay's container is
    charts/log_relay.py `CONTAINER`. Each term becomes `$.log = "*<term>*"` (or `!=` for an excluded term):
    `*` in a quoted JSON string value is CloudWatch Logs' wildcard (AWS, "Using filter patterns to match
    terms in JSON log events", e.g. `{ $.sourceIPAddress != 123.123.* }`; the CIS CloudTrail filter uses
    `"*UnauthorizedOperation"` and `"AccessDenied*"`), so a term anywhere in the line matches, as the
    unstructured pattern's substring test did, newline or not at the end. Without the container condition
    a Ray container or any other pod that prints such a line (a test, an echo of a fixture) would count."""
    conditions = [logs.FilterPattern.string_value("$.kubernetes.container_name", "=", RELAY_CONTAINER)]
    conditions += [
        logs.FilterPattern.string_value("$.log", "!=" if excluded else "=", f"*{term}*")
        for excluded, term in parse(pattern)
    ]
    return logs.FilterPattern.all(*conditions)


def nixl_namespace(cluster_name: str) -> str:
    return f"PdInference/{cluster_name}"


def ray_metric(
    name: str, cluster_name: str, statistic: str, *, period: cdk.Duration | None = None, **dimensions: str
) -> cw.Metric:
    return cw.Metric(
        namespace=RAY_METRICS_NAMESPACE,
        metric_name=check(name),
        statistic=statistic,
        period=period or cdk.Duration.minutes(1),
        dimensions_map={"ClusterName": cluster_name, **dimensions},
    )


# Gbps from bytes over microseconds: bytes x 8 bits / (us x 1e-6 s) / 1e9 = 0.008 x bytes / us.
GBPS_PER_BYTE_PER_US = 0.008
KV_RATE_PERIOD = cdk.Duration.minutes(5)


def kv_rate(cluster_name: str, when_idle: float) -> cw.MathExpression:
    """The effective KV transfer rate per transfer over each period, in Gbps: the bytes the decode engines read
    (agent_rx_bytes_total) over the transfers' own start-to-complete time (agent_xfer_time_total, microseconds
    summed over requests: NIXL's prometheus README), both summed over the cluster's pods. A period without
    transfer time is `when_idle`, not a division by zero."""
    return cw.MathExpression(
        expression=f"IF(xfer_us > 0, {GBPS_PER_BYTE_PER_US:g} * rx_bytes / xfer_us, {when_idle:g})",
        label="KV transfer Gbps",
        period=KV_RATE_PERIOD,
        using_metrics={
            "rx_bytes": ray_metric("agent_rx_bytes_total", cluster_name, "Sum", period=KV_RATE_PERIOD),
            "xfer_us": ray_metric("agent_xfer_time_total", cluster_name, "Sum", period=KV_RATE_PERIOD),
        },
    )


def gpu_memory(cluster_name: str) -> cw.Metric:
    return cw.Metric(
        namespace=CONTAINER_INSIGHTS_NAMESPACE,
        metric_name="node_gpu_memory_utilization",
        statistic="Maximum",
        period=cdk.Duration.minutes(1),
        dimensions_map={"ClusterName": cluster_name},
    )


def quantile_query(metric: str, cluster_name: str, quantile: str) -> str:
    """PromQL: the cluster's `quantile` (e.g. "0.99") of a Ray histogram over 5 minutes, in the native-histogram
    form: no `_bucket`, no `by (le)`. The scraper's OTel pipeline (stacks/observability.py) runs the
    CloudWatch agent's Prometheus receiver (amazon-cloudwatch-agent service/defaultcomponents/components.go,
    opentelemetry-collector-contrib receiver/prometheusreceiver), which folds a classic histogram's `_bucket`,
    `_sum` and `_count` series into one OTLP Histogram named after the family, its `le` values becoming the
    explicit bounds and no attribute (internal/metricfamily.go, toDistributionPoint, appendMetric). CloudWatch
    stores explicit-bucket histograms as exponential histograms (CloudWatch User Guide, "How CloudWatch stores
    histogram metrics") and queries them with Prometheus 3 PromQL ("PromQL querying"): one native-histogram
    series per label set, whose sum and rate stay histograms and which histogram_quantile reads directly. No
    `_bucket` series and no `le` label exist there, so the classic form would select nothing."""
    return f'histogram_quantile({quantile}, sum(rate({check(metric)}{{ClusterName="{cluster_name}"}}[5m])))'


def ttft_p99_query(cluster_name: str, slo_seconds: float) -> str:
    return f"{quantile_query('ray_vllm_time_to_first_token_seconds', cluster_name, '0.99')} > {slo_seconds:g}"


class StageAlarms(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        settings: Observability,
        application_logs: logs.ILogGroup,
        efa: bool,
        kv_floor_gbps: float | None = None,
    ) -> None:
        """`kv_floor_gbps`: the stage's KV transfer floor; None (colocated mode): no KV rate alarm."""
        super().__init__(scope, construct_id)
        self.alarms: dict[str, cw.AlarmBase] = {}
        self._serve_unhealthy(cluster_name)
        self._http_5xx(cluster_name, settings)
        self._ttft_p99(cluster_name, settings)
        self._gpu_memory(cluster_name, settings)
        if efa:
            self._nixl_not_on_efa(cluster_name, application_logs)
        if kv_floor_gbps is not None:
            self._kv_rate(cluster_name, kv_floor_gbps)
        if settings.alarm_topic_arn:
            self._notify(sns.Topic.from_topic_arn(self, "Topic", settings.alarm_topic_arn))

    def _serve_unhealthy(self, cluster_name: str) -> None:
        healthy = ray_metric("ray_serve_deployment_replica_healthy", cluster_name, "Minimum")
        self._add(
            "ServeUnhealthy",
            cw.Alarm(
                self,
                "ServeUnhealthy",
                metric=healthy,
                threshold=1,
                comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                treat_missing_data=cw.TreatMissingData.BREACHING,
                alarm_description="A Serve replica of the PD application is not healthy, or no Serve metrics arrive "
                "(the application is not RUNNING).",
            ),
        )

    def _http_5xx(self, cluster_name: str, settings: Observability) -> None:
        total = ray_metric("ray_serve_num_http_requests_total", cluster_name, "Sum")
        errors = ray_metric("ray_serve_num_http_requests_total", cluster_name, "Sum", status_class="5xx")
        rate = cw.MathExpression(
            expression="100 * FILL(errors, 0) / total",
            label="5xx %",
            using_metrics={"errors": errors, "total": total},
            period=cdk.Duration.minutes(1),
        )
        self._add(
            "Http5xx",
            cw.Alarm(
                self,
                "Http5xx",
                metric=rate,
                threshold=settings.error_rate_percent,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=5,
                datapoints_to_alarm=3,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=f"More than {settings.error_rate_percent:g}% of HTTP requests answered 5xx.",
            ),
        )

    def _ttft_p99(self, cluster_name: str, settings: Observability) -> None:
        self._add(
            "TtftP99",
            cw.PromQLAlarm(
                self,
                "TtftP99",
                query=ttft_p99_query(cluster_name, settings.ttft_p99_slo_seconds),
                evaluation_interval=cdk.Duration.seconds(60),
                pending_period=cdk.Duration.seconds(300),
                recovery_period=cdk.Duration.seconds(300),
                alarm_description=f"p99 time to first token above the stage's SLO of "
                f"{settings.ttft_p99_slo_seconds:g} s for 5 minutes.",
            ),
        )

    def _gpu_memory(self, cluster_name: str, settings: Observability) -> None:
        self._add(
            "GpuMemory",
            cw.Alarm(
                self,
                "GpuMemory",
                metric=gpu_memory(cluster_name),
                threshold=settings.gpu_memory_percent,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=10,
                datapoints_to_alarm=8,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=f"A GPU node's memory is above {settings.gpu_memory_percent:g}% used.",
            ),
        )

    def _nixl_not_on_efa(self, cluster_name: str, application_logs: logs.ILogGroup) -> None:
        """One metric filter per pattern on the relay's lines, and the alarm on their sum."""
        for name, pattern in NIXL_NOT_ON_EFA.items():
            logs.MetricFilter(
                self,
                f"Nixl{name}",
                log_group=application_logs,
                filter_pattern=relay_filter_pattern(pattern),
                metric_namespace=nixl_namespace(cluster_name),
                metric_name=NIXL_METRIC,
                metric_value="1",
                default_value=0,
            )
        nixl = cw.Metric(
            namespace=nixl_namespace(cluster_name),
            metric_name=NIXL_METRIC,
            statistic="Sum",
            period=cdk.Duration.minutes(5),
        )
        self._add(
            "NixlNotOnEfa",
            cw.Alarm(
                self,
                "NixlNotOnEfa",
                metric=nixl,
                threshold=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description="NIXL moves the KV cache over a libfabric provider other than efa, or over UCX, "
                "on a stage whose GPU nodes have EFA (TCP speed).",
            ),
        )

    def _kv_rate(self, cluster_name: str, floor_gbps: float) -> None:
        """Under the floor in 2 of 3 periods of 5 minutes. No transfer in a period: the expression gives the floor
        itself, which LessThanThreshold does not breach; no data at all (no PD worker scraped): not breaching
        either, as ServeUnhealthy and `ops verify` cover a stage that does not serve."""
        self._add(
            "KvTransferSlow",
            cw.Alarm(
                self,
                "KvTransferSlow",
                metric=kv_rate(cluster_name, when_idle=floor_gbps),
                threshold=floor_gbps,
                comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
                evaluation_periods=3,
                datapoints_to_alarm=2,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=f"The KV cache moves between the prefill and decode engines at under the stage's "
                f"floor of {floor_gbps:g} Gbps per transfer (NIXL's exporter: bytes read over transfer time).",
            ),
        )

    def _notify(self, topic: sns.ITopic) -> None:
        for alarm in self.alarms.values():
            alarm.add_alarm_action(cw_actions.SnsAction(topic))
            alarm.add_ok_action(cw_actions.SnsAction(topic))

    def _add(self, key: str, alarm: cw.AlarmBase) -> None:
        self.alarms[key] = alarm
