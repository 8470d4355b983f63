"""Observability: the CloudWatch add-on with Pod Identity, the dashboard's metric names, the alarms, and the
NIXL metric filters' patterns against the rehearsal's real NIXL lines and `ops verify`'s fixtures."""

from __future__ import annotations

import json
import re

import pytest

from clients import nixl
from config import topology, versions
from config.names import CONTAINER_INSIGHTS_LOG_KINDS
from config.topology import CLOUDWATCH_NAMESPACE, CLOUDWATCH_SERVICE_ACCOUNT, RAY_SCRAPER_NAME
from stacks import observability
from stacks.alarms import relay_filter_pattern
from stacks.log_patterns import NIXL_NOT_ON_EFA, matches, parse
from stacks.observability_metrics import EMF_METRICS, SHIPPED, check
from tests.helpers import ROOT

# The real stack's metric names: the series names of a GPU rehearsal's scrape (Ray 2.58.0 / vLLM 0.26.0).
SCRAPE = ROOT / "evidence" / "2026-11-30-h200-pd" / "metrics-pd.txt"


def exported() -> frozenset[str]:
    return frozenset(line.strip() for line in SCRAPE.read_text().splitlines() if line.strip())


from ..helpers import ROOT

REAL_LINES = ROOT / "evidence" / "2026-11-30-h200-pd" / "nixl-lines-pd.txt"
FIXTURES = ROOT / "tests" / "ops" / "fixtures"
# Top-level keys of the add-on's chart 6.4.0 values.yaml and of its `agent` map (aws-observability/helm-charts,
# charts/amazon-cloudwatch-observability/values.yaml): the keys this app sets must be among them.
CHART_KEYS = {
    "containerLogs",
    "agents",
    "agent",
    "dcgmExporter",
    "neuronMonitor",
    "containerInsights",
    "otelContainerInsights",
    "tolerations",
    "manager",
}
AGENT_KEYS = {
    "name",
    "mode",
    "replicas",
    "image",
    "enabled",
    "hostNetwork",
    "env",
    "priorityClassName",
    "affinity",
    "nodeSelector",
    "resources",
    "updateStrategy",
    "serviceAccount",
    "config",
    "otelConfig",
    "prometheus",
}


def _fires(lines: list[str]) -> bool:
    return any(matches(p, line) for p in NIXL_NOT_ON_EFA.values() for line in lines)


def fluent_bit_event(line: str) -> str:
    """A Container Insights application log event: Fluent Bit's JSON with the container's line in `log`."""
    return json.dumps(
        {
            "log": line + "\n",
            "stream": "stderr",
            "kubernetes": {
                "pod_name": "ray-llm-x7k2p-gpu-workers-abcde",
                "namespace_name": "inference",
                "labels": {"ray.io/node-type": "worker"},
            },
        }
    )


# --- the matcher itself ---------------------------------------------------------------------------


def test_matcher_implements_and_exclusion_and_phrases():
    assert matches('"a b" c', "x a b y c") and not matches('"a b" c', "a c b")
    assert matches('"p=" -"p=efa"', "p=tcp") and not matches('"p=" -"p=efa"', "p=efa")
    assert not matches("UCX", "ucx")  # case-sensitive


@pytest.mark.parametrize("outside", ["?a ?b", "{ $.x = 1 }", "[a, b]", "%UCX%", "-a"])
def test_matcher_refuses_syntax_outside_its_subset(outside):
    with pytest.raises(ValueError):
        parse(outside)


def test_the_patterns_are_inside_the_subset():
    for pattern in NIXL_NOT_ON_EFA.values():
        parse(pattern)


# --- the NIXL alarm's patterns against real and fixture lines --------------------------------------


def test_fires_on_the_rehearsal_ucx_lines_and_only_those():
    lines = REAL_LINES.read_text().splitlines()
    hits = [line for line in lines if _fires([line])]
    assert hits and all("Backend UCX was instantiated" in line for line in hits)
    assert len(hits) == sum("Backend UCX was instantiated" in line for line in lines) == 4
    # the healthy lines that merely mention UCX stay quiet
    assert any("UCX_RCACHE_MAX_UNRELEASED" in line for line in lines)
    assert any("Discovered backend plugin: UCX" in line for line in lines)


@pytest.mark.parametrize("fixture, fires", [("efa.log", False), ("tcp.log", True), ("ucx.log", True)])
def test_fires_on_tcp_and_ucx_fixtures_and_stays_quiet_on_efa(fixture, fires):
    lines = (FIXTURES / fixture).read_text().splitlines()
    assert _fires(lines) is fires
    assert _fires([fluent_bit_event(line) for line in lines]) is fires  # as CloudWatch sees them
    assert nixl.classify("\n".join(lines)).ok is (not fires)  # agrees with `ops verify`


@pytest.mark.parametrize("fixture", ["missing-plugin.log", "no-provider-line.log"])
def test_other_verify_failures_are_not_this_alarms(fixture):
    # no transport line at all: `ops verify` reports these; the alarm only judges a transport that was chosen
    assert not _fires((FIXTURES / fixture).read_text().splitlines())


def test_metric_filters_in_the_template_use_these_patterns(app_synth):
    # these terms, scoped to the relay's container (stacks/alarms.py relay_filter_pattern;
    # tests/stacks/test_observability_scraper.py checks the JSON form on the same lines)
    filters = app_synth.resources("dev", "cluster", "AWS::Logs::MetricFilter")
    assert sorted(f["Properties"]["FilterPattern"] for f in filters.values()) == sorted(
        relay_filter_pattern(p).log_pattern_string for p in NIXL_NOT_ON_EFA.values()
    )
    groups = {json.dumps(f["Properties"]["LogGroupName"]) for f in filters.values()}
    (_application_group,) = [  # exactly one
        g
        for g in app_synth.resources("dev", "cluster", "AWS::Logs::LogGroup").values()
        if g["Properties"].get("LogGroupName") == "/aws/containerinsights/pd-inference-dev/application"
    ]
    assert len(groups) == 1 and "Observabilityapplication" in "".join(groups).replace("Logs", "")


# --- the add-on and Pod Identity ---------------------------------------------------------------------


def _addon(app_synth, name, stage="dev"):
    return app_synth.one(stage, "cluster", "AWS::EKS::Addon", AddonName=name)


def test_addon_is_pinned_and_configured(app_synth):
    addon = _addon(app_synth, topology.CLOUDWATCH_OBSERVABILITY_ADDON)["Properties"]
    assert addon["AddonVersion"] == versions.CLOUDWATCH_OBSERVABILITY_VERSION == "v6.4.0-eksbuild.1"
    config = json.loads(addon["ConfigurationValues"])
    assert set(config) <= CHART_KEYS
    for agent in config["agents"]:
        assert set(agent) <= AGENT_KEYS
    scraper = next(a for a in config["agents"] if a["name"] == RAY_SCRAPER_NAME)
    assert scraper["mode"] == "deployment" and scraper["hostNetwork"] is False
    assert config["containerLogs"]["enabled"] is True


def test_pod_identity_binds_the_agents_service_account_and_no_node_role_gets_cloudwatch(app_synth):
    (assoc,) = app_synth.resources("dev", "cluster", "AWS::EKS::PodIdentityAssociation").values()
    assert (assoc["Properties"]["Namespace"], assoc["Properties"]["ServiceAccount"]) == (
        CLOUDWATCH_NAMESPACE,
        CLOUDWATCH_SERVICE_ACCOUNT,
    )
    _addon(app_synth, "eks-pod-identity-agent")
    roles = app_synth.resources("dev", "cluster", "AWS::IAM::Role")
    with_cw = [n for n, r in roles.items() if "CloudWatchAgentServerPolicy" in json.dumps(r)]
    assert len(with_cw) == 1
    trust = roles[with_cw[0]]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert all(s["Principal"] == {"Service": "pods.eks.amazonaws.com"} for s in trust)


def test_addon_waits_for_its_log_groups(app_synth):
    resources = app_synth.template("dev", "cluster")["Resources"]
    (name,) = [
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == topology.CLOUDWATCH_OBSERVABILITY_ADDON
    ]
    groups = {
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::Logs::LogGroup" and "/aws/containerinsights/" in r["Properties"].get("LogGroupName", "")
    }
    assert len(groups) == len(CONTAINER_INSIGHTS_LOG_KINDS) and groups <= set(resources[name]["DependsOn"])
    for group in groups:
        assert resources[group]["Properties"]["RetentionInDays"] == 30 and "KmsKeyId" in resources[group]["Properties"]


def test_every_shipped_metric_is_exported_by_the_real_stack():
    assert SHIPPED and SHIPPED - exported() == set()


def test_a_metric_name_the_code_does_not_ship_is_refused_at_synth():
    with pytest.raises(KeyError, match="ray_vllm_time_to_first_token_second is not a shipped metric"):
        check("ray_vllm_time_to_first_token_second")


def test_scrape_keeps_only_metrics_the_stack_exports():
    scrape = observability.ray_scrape_config("c", "inference")["scrape_configs"][0]
    keep = scrape["metric_relabel_configs"][0]["regex"]
    assert all(re.fullmatch(keep, n) for n in EMF_METRICS) and not re.fullmatch(keep, "ray_actors")


# --- dashboard and alarms ----------------------------------------------------------------------------

CONTAINER_INSIGHTS = {"node_gpu_utilization", "node_gpu_memory_utilization", "node_efa_rx_bytes", "node_efa_tx_bytes"}


def _dashboard(app_synth, stage="dev"):
    (dash,) = app_synth.resources(stage, "cluster", "AWS::CloudWatch::Dashboard").values()
    body = dash["Properties"]["DashboardBody"]
    text = (
        "".join(p if isinstance(p, str) else "<token>" for p in body["Fn::Join"][1]) if isinstance(body, dict) else body
    )
    return dash, text


def test_every_dashboard_metric_is_exported_or_container_insights(app_synth):
    _, body = _dashboard(app_synth)
    names = set(re.findall(r'MetricName=\\\\?"([a-z0-9_]+)', body))
    names |= set(re.findall(r'"(ray_[a-z0-9_]+)"', body))
    names |= set(re.findall(r"(ray_[a-z0-9_]+)\{", body))
    assert names, body[:500]
    assert names <= exported() | CONTAINER_INSIGHTS, names - exported() - CONTAINER_INSIGHTS
    for expected in (
        "ray_vllm_time_to_first_token_seconds",
        "ray_vllm_kv_cache_usage_perc",
        "ray_vllm_nixl_xfer_time_seconds",
        "node_gpu_memory_utilization",
        "node_efa_rx_bytes",
    ):
        assert expected in names


def _dashboard_body(app_synth) -> str:
    (dashboard,) = app_synth.resources("dev", "cluster", "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    return (
        body
        if isinstance(body, str)
        else "".join(part if isinstance(part, str) else "<token>" for part in body["Fn::Join"][1])
    )


def test_dashboard_has_the_six_rows_and_is_named_in_the_outputs(app_synth):
    outputs = app_synth.template("dev", "cluster")["Outputs"]
    (dashboard,) = app_synth.resources("dev", "cluster", "AWS::CloudWatch::Dashboard")
    assert outputs["DashboardName"]["Value"] == {"Ref": dashboard}
    assert len(set(re.findall(r'"y":(\d+)', _dashboard_body(app_synth)))) == 6


def test_the_observability_doc_lists_every_alarm_and_every_dashboard_row(app_synth):
    doc = (ROOT / "docs" / "OBSERVABILITY.md").read_text()
    alarms_table = doc[doc.index("## Alarms") : doc.index("### The NIXL patterns")]
    for key in app_synth.stages["dev"].cluster.alarms.alarms:
        assert f"\n| {key}" in alarms_table, key
    dashboard = doc[doc.index("## Dashboard") : doc.index("## Alarms")]
    assert len(re.findall(r"^row \d ", dashboard, re.MULTILINE)) == len(
        set(re.findall(r'"y":(\d+)', _dashboard_body(app_synth)))
    )


def test_alarms_and_thresholds_come_from_the_stage_file(app_synth, stages):
    for stage in ("dev", "prod"):
        settings = stages[stage].observability
        alarms = {
            re.sub(r"[0-9A-F]{8}$", "", name).removeprefix("Alarms"): a["Properties"]
            for name, a in app_synth.resources(stage, "cluster", "AWS::CloudWatch::Alarm").items()
        }
        assert set(alarms) == {"ServeUnhealthy", "Http5xx", "TtftP99", "GpuMemory", "NixlNotOnEfa", "KvTransferSlow"}
        assert alarms["Http5xx"]["Threshold"] == settings.error_rate_percent
        assert alarms["GpuMemory"]["Threshold"] == settings.gpu_memory_percent
        query = json.dumps(alarms["TtftP99"])
        assert "ray_vllm_time_to_first_token_seconds" in query and f"> {settings.ttft_p99_slo_seconds:g}" in query


def test_no_nixl_alarm_without_efa_and_a_topic_gets_every_alarm(tmp_path):
    from ..helpers import config_with, synth

    cfg = config_with(
        tmp_path,
        gpu_nodegroup={"efa": False},
        serving={"kv_transfer_floor_gbps": 1},
        observability={"alarm_topic_arn": "arn:aws:sns:us-west-2:123456789012:alarms"},
    )
    result = synth([cfg], tmp_path / "out")
    alarms = result.resources("dev", "cluster", "AWS::CloudWatch::Alarm").values()
    assert not result.resources("dev", "cluster", "AWS::Logs::MetricFilter")
    assert len(alarms) == 5  # no NixlNotOnEfa; KvTransferSlow at the stated floor (tests/stacks/test_kv_rate_alarm.py)
    assert all(a["Properties"]["AlarmActions"] == ["arn:aws:sns:us-west-2:123456789012:alarms"] for a in alarms)
    assert all(a["Properties"]["OKActions"] == ["arn:aws:sns:us-west-2:123456789012:alarms"] for a in alarms)
