"""`ops verify`'s telemetry check: do the stage's metrics and logs reach CloudWatch?

What the amazon-cloudwatch-observability add-on ships (stacks/observability.py), read back the way an
operator would look for it:
- Container Insights metrics of the cluster (namespace `ContainerInsights`, dimension `ClusterName`):
  at least one that received data recently (`ListMetrics` with `RecentlyActive=PT3H`, the only window
  CloudWatch offers there);
- the Ray and vLLM metrics the agent scrapes from the Ray pods (namespace `ContainerInsights/Prometheus`,
  dimension `ClusterName`), likewise;
- the application log group (`/aws/containerinsights/<cluster>/application`, Fluent Bit's): its newest
  stream's last event within `LOG_FRESHNESS_MINUTES`.
A stage with `observability.enabled: false` gets a skip that says so. Each failure names what is missing
and where to look. Tested against moto (tests/ops/test_telemetry.py); against a real account it has not run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError

from clients.report import Report
from config.schema import StageConfig
from config.topology import (
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_OBSERVABILITY_ADDON,
    CONTAINER_INSIGHTS_NAMESPACE,
    RAY_METRICS_NAMESPACE,
    RAY_SCRAPER_POD_LABELS,
    container_insights_log_group,
)

from .aws_clients import Clients

NAME = "metrics and logs in CloudWatch"
LOG_FRESHNESS_MINUTES = 30
RECENTLY_ACTIVE = "PT3H"  # CloudWatch's only RecentlyActive value


def _active_metrics(cloudwatch, namespace: str, cluster: str) -> list[str]:
    names: list[str] = []
    paginator = cloudwatch.get_paginator("list_metrics")
    for page in paginator.paginate(
        Namespace=namespace, Dimensions=[{"Name": "ClusterName", "Value": cluster}], RecentlyActive=RECENTLY_ACTIVE
    ):
        names += [metric["MetricName"] for metric in page.get("Metrics", [])]
    return sorted(set(names))


def _newest_log_event(logs, group: str) -> dt.datetime | None:
    answer = logs.describe_log_streams(logGroupName=group, orderBy="LastEventTime", descending=True, limit=1)
    streams = answer.get("logStreams") or []
    stamp = streams[0].get("lastEventTimestamp") if streams else None
    return dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC) if stamp else None


def _addon_fix(cluster: str) -> str:
    return (
        f"is the {CLOUDWATCH_OBSERVABILITY_ADDON} add-on ACTIVE? "
        f"(aws eks describe-addon --cluster-name {cluster} --addon-name {CLOUDWATCH_OBSERVABILITY_ADDON})"
    )


def check(
    cfg: StageConfig, clients: Clients, report: Report, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> None:
    if not cfg.observability.enabled:
        report.add(NAME, "skip", f"observability is off in config/{cfg.stage}.yaml (observability.enabled: false)")
        return
    cluster = cfg.cluster_name
    group = container_insights_log_group(cluster, "application")
    try:
        cloudwatch, logs = clients("cloudwatch"), clients("logs")
        nodes = _active_metrics(cloudwatch, CONTAINER_INSIGHTS_NAMESPACE, cluster)
        ray = _active_metrics(cloudwatch, RAY_METRICS_NAMESPACE, cluster)
        newest = _newest_log_event(logs, group)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ResourceNotFoundException":
            fix = f"deploy the cluster stack of {cfg.stage} (it creates the group); {_addon_fix(cluster)}"
            report.add(NAME, "fail", f"no log group {group}", fix)
        else:
            report.add(
                NAME,
                "fail",
                f"CloudWatch refused: {error.get('Code')}: {error.get('Message', '')}",
                "the caller needs cloudwatch:ListMetrics and logs:DescribeLogStreams",
            )
        return
    except BotoCoreError as exc:
        report.add(NAME, "fail", f"cannot reach CloudWatch: {exc}")
        return
    age = None if newest is None else (now() - newest).total_seconds() / 60
    problems, fixes = _problems(cluster, group, nodes, ray, age)
    if problems:
        report.add(NAME, "fail", "; ".join(problems), "; ".join(dict.fromkeys(fixes)))
        return
    report.add(
        NAME,
        "pass",
        f"{len(nodes)} Container Insights and {len(ray)} Ray/vLLM metrics active; newest "
        f"application log event {age:.0f} min ago",
        ray_metrics=len(ray),
        node_metrics=len(nodes),
    )


def _problems(
    cluster: str, group: str, nodes: list[str], ray: list[str], age: float | None
) -> tuple[list[str], list[str]]:
    """What is missing (no node or Ray metric, no fresh log event), and the fix for each."""
    problems, fixes = [], []
    if not nodes:
        problems.append(f"no {CONTAINER_INSIGHTS_NAMESPACE} metric of {cluster} in the last 3 h")
        fixes.append(_addon_fix(cluster))
    if not ray:
        problems.append(f"no {RAY_METRICS_NAMESPACE} (Ray/vLLM) metric of {cluster} in the last 3 h")
        fixes.append(
            "are the Ray pods up, and does the inference namespace's NetworkPolicy admit the "
            f"scraper on the metrics port? (kubectl -n {CLOUDWATCH_NAMESPACE} logs -l {_selector(RAY_SCRAPER_POD_LABELS)})"
        )
    if age is None or age > LOG_FRESHNESS_MINUTES:
        problems.append(
            f"no container log event in {group} in the last {LOG_FRESHNESS_MINUTES} min"
            + ("" if age is None else f" (newest {age:.0f} min ago)")
        )
        # the add-on's DaemonSet `fluent-bit` (aws-observability/helm-charts, amazon-cloudwatch-observability
        # templates/linux/fluent-bit-daemonset.yaml)
        fixes.append(
            f"is Fluent Bit running? (kubectl -n {CLOUDWATCH_NAMESPACE} get ds fluent-bit); {_addon_fix(cluster)}"
        )
    return problems, fixes


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{name}={value}" for name, value in labels.items())
