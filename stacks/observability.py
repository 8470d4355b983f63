"""Collection: the amazon-cloudwatch-observability EKS add-on in enhanced Container Insights mode, with EKS
Pod Identity (no node-role policy), the log groups it writes (owned here, for retention and encryption),
and a deployment-mode agent that scrapes the Ray pods' metrics port.

What it brings (docs/OBSERVABILITY.md): node, pod and container metrics, NVIDIA GPU metrics from the DCGM
exporter and EFA metrics per node and pod (namespace ContainerInsights); container logs through Fluent Bit
(/aws/containerinsights/<cluster>/application); Ray Serve and vLLM counters and gauges as CloudWatch metrics
(EMF, namespace ContainerInsights/Prometheus); their latency histograms over OTLP for PromQL.

The configuration keys are those of the add-on's Helm chart 6.4.0 (aws-observability/helm-charts,
charts/amazon-cloudwatch-observability/values.yaml): `containerLogs`, `agents` (each entry merged over
`agent`), `config`, `otelConfig`, `prometheus.config`, `mode`, `replicas`, `hostNetwork`, `nodeSelector`.
"""
from __future__ import annotations

from typing import Any, Sequence

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from config import versions
from config.names import CONTAINER_INSIGHTS_LOG_KINDS
from config.topology import (CLOUDWATCH_NAMESPACE, CLOUDWATCH_OBSERVABILITY_ADDON, CLOUDWATCH_SERVICE_ACCOUNT,
                             POD_IDENTITY_AGENT_ADDON, RAY_METRICS_NAMESPACE, RAY_METRICS_PORT_NAME, RAY_SCRAPER_NAME,
                             SYSTEM_LABELS, container_insights_log_group)

from .observability_metrics import EMF_METRICS, EMF_METRICS_BY_DIMENSION, HISTOGRAMS, check

# Where the agents write (Container Insights' fixed names, /aws/containerinsights/<cluster>/<kind>).
LOG_KINDS = CONTAINER_INSIGHTS_LOG_KINDS
SCRAPE_INTERVAL = "30s"
# Where the operator mounts the `prometheus.config` of an agent (amazon-cloudwatch-agent-operator,
# internal/manifests/collector/config_replace.go).
PROMETHEUS_CONFIG_PATH = "/etc/prometheusconfig/prometheus.yaml"


def _ray_targets(cluster_name: str, namespace: str) -> dict[str, Any]:
    """One Prometheus job: every Ray pod (KubeRay labels ray.io/node-type) of the serving namespace, on its
    `metrics` container port, labelled with the cluster, pod, Ray group and node type."""
    return {
        "job_name": "ray",
        "scrape_interval": SCRAPE_INTERVAL,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_pod_label_ray_io_node_type"], "regex": "head|worker",
             "action": "keep"},
            {"source_labels": ["__meta_kubernetes_pod_container_port_name"], "regex": RAY_METRICS_PORT_NAME,
             "action": "keep"},
            {"target_label": "ClusterName", "replacement": cluster_name},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod_name"},
            {"source_labels": ["__meta_kubernetes_pod_label_ray_io_group"], "target_label": "ray_group"},
            {"source_labels": ["__meta_kubernetes_pod_label_ray_io_node_type"], "target_label": "ray_node_type"},
        ],
    }


def _keep(names: Sequence[str], suffix: str = "") -> dict[str, Any]:
    return {"source_labels": ["__name__"], "regex": f"({'|'.join(check(n) for n in names)}){suffix}",
            "action": "keep"}


def ray_scrape_config(cluster_name: str, namespace: str) -> dict[str, Any]:
    """The counters and gauges of EMF_METRICS (the rest of Ray's ~200 series is dropped at the scrape, so it
    costs nothing), with the HTTP status folded into status_class (2xx, 4xx, 5xx)."""
    job = _ray_targets(cluster_name, namespace)
    job["metric_relabel_configs"] = [
        _keep(EMF_METRICS),
        {"source_labels": ["status_code"], "regex": "([0-9])[0-9][0-9]", "target_label": "status_class",
         "replacement": "${1}xx"},
    ]
    return {"global": {"scrape_interval": SCRAPE_INTERVAL}, "scrape_configs": [job]}


def ray_emf_config(cluster_name: str) -> dict[str, Any]:
    """CloudWatch agent JSON: the Prometheus scrape to embedded-metric-format log events, one declaration per
    dimension shape (the CloudWatch agent's `emf_processor`)."""
    def declaration(names: tuple[str, ...], dimension: str) -> dict[str, Any]:
        return {"source_labels": ["job"], "label_matcher": "^ray$",
                "dimensions": [["ClusterName"], ["ClusterName", dimension]],
                "metric_selectors": [f"^{check(n)}$" for n in names]}

    return {
        "logs": {
            "metrics_collected": {"prometheus": {
                "cluster_name": cluster_name,
                "log_group_name": container_insights_log_group(cluster_name, "prometheus"),
                "prometheus_config_path": PROMETHEUS_CONFIG_PATH,
                "emf_processor": {
                    "metric_declaration_dedup": True,
                    "metric_namespace": RAY_METRICS_NAMESPACE,
                    "metric_declaration": [declaration(names, dimension)
                                           for dimension, names in EMF_METRICS_BY_DIMENSION.items()],
                },
            }},
            "force_flush_interval": 5,
        },
    }


def ray_histogram_otel_config(cluster_name: str, namespace: str, region: str) -> dict[str, Any]:
    """The latency and transfer histograms, which the EMF path drops, over OTLP to CloudWatch's metrics
    endpoint (stored as histograms, queried with PromQL). Extension, exporter and endpoint as the add-on's
    own OTel Container Insights pipeline spells them (chart 6.4.0, _otel-container-insights-config.tpl)."""
    job = _ray_targets(cluster_name, namespace)
    job["metric_relabel_configs"] = [_keep(HISTOGRAMS, "_(bucket|sum|count)")]
    return {
        "extensions": {"sigv4auth/pd_ray_metrics": {"region": region, "service": "monitoring"}},
        "receivers": {"prometheus/pd_ray_histograms": {"config": {"scrape_configs": [job]}}},
        "exporters": {"otlphttp/pd_ray_metrics": {
            "endpoint": f"https://monitoring.{region}.amazonaws.com:443", "tls": {"insecure": False},
            "auth": {"authenticator": "sigv4auth/pd_ray_metrics"}}},
        "service": {"extensions": ["sigv4auth/pd_ray_metrics"], "pipelines": {"metrics/pd_ray_histograms": {
            "receivers": ["prometheus/pd_ray_histograms"], "exporters": ["otlphttp/pd_ray_metrics"]}}},
    }


def addon_configuration(cluster_name: str, namespace: str, region: str) -> dict[str, Any]:
    """The add-on's configuration values: the default node agent (enhanced Container Insights, DCGM and EFA)
    and container logs as they come, plus the Ray scraper: one replica on the system nodes, off the host
    network so that a NetworkPolicy can admit it by its pod labels (config/topology.py)."""
    config = ray_emf_config(cluster_name)
    return {
        "containerLogs": {"enabled": True},
        "agents": [
            {"name": "cloudwatch-agent"},  # the chart's default node agent, kept
            {"name": RAY_SCRAPER_NAME, "mode": "deployment", "replicas": 1, "hostNetwork": False,
             "nodeSelector": dict(SYSTEM_LABELS), "config": config,
             "otelConfig": ray_histogram_otel_config(cluster_name, namespace, region),
             "prometheus": {"config": ray_scrape_config(cluster_name, namespace)}},
        ],
    }


class Observability(Construct):
    """The add-on, its Pod Identity role and association, the Pod Identity agent, and the log groups."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: eks.Cluster, cluster_name: str,
                 serving_namespace: str, logs_key: kms.IKey, retention: logs.RetentionDays,
                 nodes: Sequence[IDependable]) -> None:
        super().__init__(scope, construct_id)
        region = cdk.Stack.of(self).region
        self.log_groups = {kind: logs.LogGroup(
            self, f"Logs-{kind}", log_group_name=container_insights_log_group(cluster_name, kind), retention=retention,
            encryption_key=logs_key, removal_policy=cdk.RemovalPolicy.DESTROY) for kind in LOG_KINDS}
        self.application_logs = self.log_groups["application"]

        self.role = iam.Role(self, "AgentRole", assumed_by=iam.ServicePrincipal("pods.eks.amazonaws.com"),
                             description=f"CloudWatch agent and Fluent Bit of {cluster_name} (Pod Identity)",
                             managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                                 "CloudWatchAgentServerPolicy")])
        self.role.assume_role_policy.add_statements(iam.PolicyStatement(
            actions=["sts:TagSession"], principals=[iam.ServicePrincipal("pods.eks.amazonaws.com")]))
        self.agent = eks.Addon(self, "PodIdentityAgent", cluster=cluster, addon_name=POD_IDENTITY_AGENT_ADDON)
        self.association = eks.CfnPodIdentityAssociation(
            self, "AgentAccess", cluster_name=cluster.cluster_name, namespace=CLOUDWATCH_NAMESPACE,
            service_account=CLOUDWATCH_SERVICE_ACCOUNT, role_arn=self.role.role_arn)
        self.addon = eks.Addon(self, "CloudWatchObservability", cluster=cluster,
                               addon_name=CLOUDWATCH_OBSERVABILITY_ADDON,
                               addon_version=versions.CLOUDWATCH_OBSERVABILITY_VERSION,
                               configuration_values=addon_configuration(cluster_name, serving_namespace, region))
        # Log groups first (or the agents create them, never expiring, and CloudFormation then fails);
        # credentials before the agents start; nodes to run on.
        self.addon.node.add_dependency(*self.log_groups.values(), self.agent, self.association, *nodes)
