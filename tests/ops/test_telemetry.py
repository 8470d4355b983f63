"""`ops verify`'s telemetry check against moto's CloudWatch and CloudWatch Logs: metrics of both
namespaces and a fresh application log event pass; each missing piece fails naming it; a stage with
observability off is skipped with the reason."""

from __future__ import annotations

import datetime as dt

import boto3
import pytest
from moto import mock_aws

from clients.report import Report
from config import CONFIG_DIR, load_stages
from config.topology import CONTAINER_INSIGHTS_NAMESPACE, RAY_METRICS_NAMESPACE, container_insights_log_group
from ops import telemetry
from ops.aws_clients import Clients

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def dev():
    (cfg,) = load_stages(CONFIG_DIR, only="dev")
    return cfg


@pytest.fixture
def aws(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        session = boto3.session.Session(region_name="us-west-2")
        yield Clients(session, "us-west-2")


def _metric(clients, namespace: str, name: str, cluster: str) -> None:
    clients("cloudwatch").put_metric_data(
        Namespace=namespace,
        MetricData=[{"MetricName": name, "Value": 1.0, "Dimensions": [{"Name": "ClusterName", "Value": cluster}]}],
    )


def _log(clients, cluster: str, minutes_ago: float) -> None:
    logs, group = clients("logs"), container_insights_log_group(cluster, "application")
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="ray-worker")
    stamp = int((dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes_ago)).timestamp() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName="ray-worker",
        logEvents=[{"timestamp": stamp, "message": "Backend LIBFABRIC was instantiated"}],
    )


def _run(cfg, clients) -> Report:
    report = Report("verify", cfg.stage)
    telemetry.check(cfg, clients, report, now=lambda: dt.datetime.now(dt.UTC))
    return report


def test_metrics_of_both_namespaces_and_a_fresh_log_event_pass(dev, aws):
    _metric(aws, CONTAINER_INSIGHTS_NAMESPACE, "node_gpu_utilization", dev.cluster_name)
    _metric(aws, RAY_METRICS_NAMESPACE, "ray_vllm_num_requests_running", dev.cluster_name)
    _log(aws, dev.cluster_name, minutes_ago=2)
    check = _run(dev, aws).find(telemetry.NAME)
    assert check.status == "pass", check.detail
    assert (check.data["node_metrics"], check.data["ray_metrics"]) == (1, 1)


def test_no_ray_metrics_fails_naming_the_namespace_and_the_scraper(dev, aws):
    _metric(aws, CONTAINER_INSIGHTS_NAMESPACE, "node_gpu_utilization", dev.cluster_name)
    _log(aws, dev.cluster_name, minutes_ago=2)
    check = _run(dev, aws).find(telemetry.NAME)
    assert check.status == "fail"
    assert check.detail == f"no {RAY_METRICS_NAMESPACE} (Ray/vLLM) metric of {dev.cluster_name} in the last 3 h"
    assert "NetworkPolicy" in check.fix
    assert (
        "kubectl -n amazon-cloudwatch logs -l app.kubernetes.io/instance=amazon-cloudwatch.ray-metrics-scraper"
        in check.fix
    )


def test_metrics_of_another_cluster_do_not_count(dev, aws):
    _metric(aws, CONTAINER_INSIGHTS_NAMESPACE, "node_gpu_utilization", "someone-else")
    _metric(aws, RAY_METRICS_NAMESPACE, "ray_vllm_num_requests_running", "someone-else")
    _log(aws, dev.cluster_name, minutes_ago=2)
    check = _run(dev, aws).find(telemetry.NAME)
    assert check.status == "fail" and check.detail.count("metric of") == 2


def test_a_stale_log_group_fails_with_its_age(dev, aws):
    _metric(aws, CONTAINER_INSIGHTS_NAMESPACE, "node_gpu_utilization", dev.cluster_name)
    _metric(aws, RAY_METRICS_NAMESPACE, "ray_vllm_num_requests_running", dev.cluster_name)
    _log(aws, dev.cluster_name, minutes_ago=90)
    check = _run(dev, aws).find(telemetry.NAME)
    assert check.status == "fail"
    assert check.detail.startswith(
        f"no container log event in {container_insights_log_group(dev.cluster_name, 'application')} in the last 30 min"
    )
    assert "(newest 90 min ago)" in check.detail


def test_a_missing_log_group_fails_naming_it(dev, aws):
    check = _run(dev, aws).find(telemetry.NAME)
    assert check.status == "fail"
    assert check.detail == f"no log group {container_insights_log_group(dev.cluster_name, 'application')}"


def test_observability_off_is_a_skip_with_the_reason(dev, aws):
    off = dev.model_copy(update={"observability": dev.observability.model_copy(update={"enabled": False})})
    check = _run(off, aws).find(telemetry.NAME)
    assert (check.status, check.detail) == (
        "skip",
        "observability is off in config/dev.yaml (observability.enabled: false)",
    )


def test_verify_runs_the_telemetry_check_after_the_cluster_checks(dev, aws):
    from ops import verify

    from .fake_cluster import TOKEN, FakeCluster, Scenario

    with FakeCluster(Scenario()) as fake:
        report = verify.run(dev, fake.api(TOKEN), progress=lambda *a: None, cloudwatch=aws)
    assert [c.name for c in report.checks][-1] == telemetry.NAME
    assert report.find(telemetry.NAME).status == "fail"  # moto's account has no log group yet
