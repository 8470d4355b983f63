"""The KV transfer rate (NIXL's exporter, scraped by the CloudWatch agent): the alarm under the stage's floor
while transfers happen, the dashboard widget, and the scrape job that ships the two counters."""

from __future__ import annotations

import json
import re

from config.derived import kv_transfer_floor_gbps
from config.topology import NIXL_METRICS_PORT_NAME, RAY_METRICS_NAMESPACE
from stacks import observability
from stacks.observability_metrics import NIXL_METRICS, check

from ..helpers import config_with, synth

EXPRESSION = "IF(xfer_us > 0, 0.008 * rx_bytes / xfer_us, {idle})"


def _alarms(result, stage):
    return {
        re.sub(r"[0-9A-F]{8}$", "", name).removeprefix("Alarms"): a["Properties"]
        for name, a in result.resources(stage, "cluster", "AWS::CloudWatch::Alarm").items()
    }


def test_the_alarm_divides_bytes_by_transfer_time_under_the_floor(app_synth, stages):
    for stage in ("dev", "prod"):
        floor = kv_transfer_floor_gbps(stages[stage])
        assert floor == 6.25  # a quarter of g6.8xlarge's one 25 Gbps interface
        alarm = _alarms(app_synth, stage)["KvTransferSlow"]
        assert alarm["Threshold"] == floor
        assert alarm["ComparisonOperator"] == "LessThanThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 2)
        queries = {q["Id"]: q for q in alarm["Metrics"]}
        assert queries["expr_1"]["Expression"] == EXPRESSION.format(idle="6.25")
        for query_id, name in (("rx_bytes", "agent_rx_bytes_total"), ("xfer_us", "agent_xfer_time_total")):
            stat = queries[query_id]["MetricStat"]
            assert stat["Metric"]["MetricName"] == name and stat["Metric"]["Namespace"] == RAY_METRICS_NAMESPACE
            assert stat["Metric"]["Dimensions"] == [{"Name": "ClusterName", "Value": stages[stage].cluster_name}]
            assert (stat["Stat"], stat["Period"]) == ("Sum", 300)


def test_gbps_from_bytes_and_microseconds():
    # the measured PD round: 672,399,360 bytes; at 1 s of transfer time in all that is 5.379 Gbps
    assert 0.008 * 672_399_360 / 1_000_000 == 672_399_360 * 8 / 1e9


def test_no_rate_alarm_in_colocated_mode_and_a_stated_floor_without_efa(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "n").mkdir()
    colocated = config_with(tmp_path / "c", serving={"mode": "colocated"})
    no_efa = config_with(
        tmp_path / "n", stage="dev", gpu_nodegroup={"efa": False}, serving={"kv_transfer_floor_gbps": 2}
    )
    result = synth([colocated], tmp_path / "out-c")
    assert "KvTransferSlow" not in _alarms(result, "dev")
    result = synth([no_efa], tmp_path / "out-n")
    alarm = _alarms(result, "dev")["KvTransferSlow"]
    assert alarm["Threshold"] == 2
    assert {q["Id"]: q for q in alarm["Metrics"]}["expr_1"]["Expression"] == EXPRESSION.format(idle="2")


def test_the_dashboard_shows_the_rate_against_the_floor(app_synth):
    (dash,) = app_synth.resources("dev", "cluster", "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dash["Properties"]["DashboardBody"])
    assert "KV transfer Gbps per transfer (0: no transfer)" in body
    assert EXPRESSION.format(idle="0").replace('"', '\\\\"') in body or EXPRESSION.format(idle="0") in body
    assert "floor 6.25 Gbps" in body


def test_the_scraper_keeps_nixls_counters_from_the_named_port_only():
    config = observability.ray_scrape_config("c", "inference")
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "nixl"]
    port_rule = next(
        r for r in job["relabel_configs"] if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_name"]
    )
    assert port_rule == {
        "source_labels": ["__meta_kubernetes_pod_container_port_name"],
        "regex": NIXL_METRICS_PORT_NAME,
        "action": "keep",
    }
    keep = job["metric_relabel_configs"][0]["regex"]
    assert all(re.fullmatch(keep, n) for n in NIXL_METRICS)
    assert not re.fullmatch(keep, "agent_rx_last_bytes") and not re.fullmatch(keep, "agent_xfer_time_us_bucket")


def test_the_emf_declaration_ships_them_by_cluster_and_pod():
    emf = observability.ray_emf_config("c", "us-west-2")["logs"]["metrics_collected"]["prometheus"]["emf_processor"]
    (nixl,) = [d for d in emf["metric_declaration"] if d["label_matcher"] == "^nixl$"]
    assert nixl["dimensions"] == [["ClusterName"], ["ClusterName", "pod_name"]]
    assert nixl["metric_selectors"] == [f"^{check(n)}$" for n in NIXL_METRICS]
