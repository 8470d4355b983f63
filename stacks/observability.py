"""Collection: the amazon-cloudwatch-observability EKS add-on in enhanced Container Insights mode, with EKS
Pod Identity (no node-role policy), the log groups it writes (owned here, for retention and encryption),
and a deployment-mode agent that scrapes the Ray pods' metrics port.

What it brings (docs/OBSERVABILITY.md): node, pod and container metrics, NVIDIA GPU metrics from the DCGM
exporter and EFA metrics per node and pod (namespace ContainerInsights); container logs through Fluent Bit
(/aws/containerinsights/<cluster>/application); Ray Serve and vLLM counters and gauges as CloudWatch metrics
(EMF, namespace ContainerInsights/Prometheus); their latency histograms over OTLP for PromQL.

The configuration keys are those of the add-on's Helm chart 6.4.0 (aws-observability/helm-charts,
charts/amazon-cloudwatch-observability/values.yaml): `containerLogs`, `agents` (each entry merged over
`agent`), `config`, `otelConfig`, `prometheus.config`, `mode`, `replicas`, `hostNetwork`, `nodeSelector`,
`env`, and `manager.applicationSignals.autoMonitor.monitorAllServices`.

The scraper runs off the host network on nodes whose IMDS answers only one hop (stacks/nodegroups.py,
IMDS_HOP_LIMIT), so it cannot find its region or mode in instance metadata; it gets both from here
(`SCRAPER_ENV`, `agent.region`). docs/OBSERVABILITY.md, "The scraper's region, mode and credentials",
has the agent source this follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct, IDependable

from config import versions
from config.names import CONTAINER_INSIGHTS_LOG_KINDS
from config.topology import (
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_OBSERVABILITY_ADDON,
    CLOUDWATCH_SERVICE_ACCOUNT,
    NIXL_METRICS_PORT_NAME,
    POD_IDENTITY_AGENT_ADDON,
    RAY_METRICS_NAMESPACE,
    RAY_METRICS_PORT_NAME,
    RAY_SCRAPER_NAME,
    SYSTEM_LABELS,
    container_insights_log_group,
)

from .observability_metrics import EMF_METRICS, EMF_METRICS_BY_DIMENSION, HISTOGRAMS, NIXL_METRICS, check

# Where the agents write (Container Insights' fixed names, /aws/containerinsights/<cluster>/<kind>).
SCRAPE_INTERVAL = "30s"
# Where the operator mounts the `prometheus.config` of an agent (amazon-cloudwatch-agent-operator,
# internal/manifests/collector/config_replace.go).
PROMETHEUS_CONFIG_PATH = "/etc/prometheusconfig/prometheus.yaml"

# The scraper's agent mode: withIRSA, so its clients take Pod Identity's credentials from the SDK's default
# chain (docs/OBSERVABILITY.md, "The scraper's region, mode and credentials").
SCRAPER_ENV = ({"name": "RUN_WITH_IRSA", "value": "True"},)


def _ray_targets(
    cluster_name: str, namespace: str, *, job: str = "ray", port: str = RAY_METRICS_PORT_NAME
) -> dict[str, Any]:
    """One Prometheus job: every Ray pod (KubeRay labels ray.io/node-type) of the serving namespace, on its
    container port named `port` (`metrics`: Ray's; `nixl-metrics`: NIXL's exporter on a PD worker),
    labelled with the cluster, pod, Ray group and node type."""
    return {
        "job_name": job,
        "scrape_interval": SCRAPE_INTERVAL,
        "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [namespace]}}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_ray_io_node_type"],
                "regex": "head|worker",
                "action": "keep",
            },
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": port,
                "action": "keep",
            },
            {"target_label": "ClusterName", "replacement": cluster_name},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod_name"},
            {"source_labels": ["__meta_kubernetes_pod_label_ray_io_group"], "target_label": "ray_group"},
            {"source_labels": ["__meta_kubernetes_pod_label_ray_io_node_type"], "target_label": "ray_node_type"},
        ],
    }


def _keep(names: Sequence[str], suffix: str = "") -> dict[str, Any]:
    return {"source_labels": ["__name__"], "regex": f"({'|'.join(check(n) for n in names)}){suffix}", "action": "keep"}


def nixl_scrape_job(cluster_name: str, namespace: str) -> dict[str, Any]:
    """NIXL's exporter on the PD workers (none on a colocated stage: the job finds no target), NIXL_METRICS
    only (its gauges and histograms are dropped at the scrape)."""
    job = _ray_targets(cluster_name, namespace, job="nixl", port=NIXL_METRICS_PORT_NAME)
    job["metric_relabel_configs"] = [_keep(NIXL_METRICS)]
    return job


def ray_scrape_config(cluster_name: str, namespace: str) -> dict[str, Any]:
    """The counters and gauges of EMF_METRICS (the rest of Ray's ~200 series is dropped at the scrape, so it
    costs nothing), with the HTTP status folded into status_class (2xx, 4xx, 5xx); and NIXL's exporter."""
    job = _ray_targets(cluster_name, namespace)
    job["metric_relabel_configs"] = [
        _keep(EMF_METRICS),
        {
            "source_labels": ["status_code"],
            "regex": "([0-9])[0-9][0-9]",
            "target_label": "status_class",
            "replacement": "${1}xx",
        },
    ]
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL},
        "scrape_configs": [job, nixl_scrape_job(cluster_name, namespace)],
    }


def ray_emf_config(cluster_name: str, region: str) -> dict[str, Any]:
    """CloudWatch agent JSON: the Prometheus scrape to embedded-metric-format log events, one declaration per
    dimension shape (the CloudWatch agent's `emf_processor`), in the stage's region.

    `agent.region` is set here because nothing else would: the chart adds a region only to a config with a
    `kubernetes` or `application_signals` section (templates/_helpers.tpl, cloudwatch-agent.modify-config,
    calling config-modifier), and the agent asks metadata for one only in ec2 mode (aws/amazon-cloudwatch-agent,
    translator/util/sdkutil.go); translator/translate/agent/ruleRegion.go takes this value first, and without
    it fails with "Region info is missing for mode"."""

    def declaration(names: tuple[str, ...], dimension: str, job: str = "ray") -> dict[str, Any]:
        return {
            "source_labels": ["job"],
            "label_matcher": f"^{job}$",
            "dimensions": [["ClusterName"], ["ClusterName", dimension]],
            "metric_selectors": [f"^{check(n)}$" for n in names],
        }

    return {
        "agent": {"region": region},
        "logs": {
            "metrics_collected": {
                "prometheus": {
                    "cluster_name": cluster_name,
                    "log_group_name": container_insights_log_group(cluster_name, "prometheus"),
                    "prometheus_config_path": PROMETHEUS_CONFIG_PATH,
                    "emf_processor": {
                        "metric_declaration_dedup": True,
                        "metric_namespace": RAY_METRICS_NAMESPACE,
                        "metric_declaration": [
                            *(declaration(names, dim) for dim, names in EMF_METRICS_BY_DIMENSION.items()),
                            declaration(NIXL_METRICS, "pod_name", job="nixl"),
                        ],
                    },
                }
            },
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
        "exporters": {
            "otlphttp/pd_ray_metrics": {
                "endpoint": f"https://monitoring.{region}.amazonaws.com:443",
                "tls": {"insecure": False},
                "auth": {"authenticator": "sigv4auth/pd_ray_metrics"},
            }
        },
        "service": {
            "extensions": ["sigv4auth/pd_ray_metrics"],
            "pipelines": {
                "metrics/pd_ray_histograms": {
                    "receivers": ["prometheus/pd_ray_histograms"],
                    "exporters": ["otlphttp/pd_ray_metrics"],
                }
            },
        },
    }


# Application Signals auto-monitoring off, or every workload a Service selects gets SDK injection annotations
# (docs/OBSERVABILITY.md, "Application Signals auto-monitoring: off").
AUTO_MONITOR = {"monitorAllServices": False}


def addon_configuration(cluster_name: str, namespace: str, region: str) -> dict[str, Any]:
    """The add-on's configuration values: the default node agent (enhanced Container Insights, DCGM and EFA)
    and container logs as they come, Application Signals' auto-monitoring off, plus the Ray scraper: one
    replica on the system nodes, off the host network so that a NetworkPolicy can admit it by its pod labels
    (config/topology.py), with its region in its config and its agent mode in its environment
    (`SCRAPER_ENV`). The chart appends an agent's `env` to the container's (templates/linux/
    cloudwatch-agent-custom-resource.yaml; `env: []` in `agent`, values.yaml), and the
    AmazonCloudWatchAgent CRD's spec.env is a list of EnvVar (crds/cloudwatch.aws.amazon.com_
    amazoncloudwatchagents.yaml), which the operator puts first in the agent container's env
    (amazon-cloudwatch-agent-operator v3.6.0, internal/manifests/collector/container.go)."""
    config = ray_emf_config(cluster_name, region)
    return {
        "containerLogs": {"enabled": True},
        "manager": {"applicationSignals": {"autoMonitor": dict(AUTO_MONITOR)}},
        "agents": [
            {"name": "cloudwatch-agent"},  # the chart's default node agent, kept
            {
                "name": RAY_SCRAPER_NAME,
                "mode": "deployment",
                "replicas": 1,
                "hostNetwork": False,
                "nodeSelector": dict(SYSTEM_LABELS),
                "env": [dict(v) for v in SCRAPER_ENV],
                "config": config,
                "otelConfig": ray_histogram_otel_config(cluster_name, namespace, region),
                "prometheus": {"config": ray_scrape_config(cluster_name, namespace)},
            },
        ],
    }


def pod_identity_principal(cluster_arn: str, namespace: str, service_account: str) -> iam.IPrincipal:
    """EKS Pod Identity's service principal, trusted only for one service account of one cluster: one
    statement with sts:AssumeRole and sts:TagSession and the session tags EKS Pod Identity sets on that call.

    AWS documents the trust policy's scoping with those tags: "You can use these tags in the condition keys in
    the trust policy to restrict which service accounts, namespaces, and clusters can use this role", with an
    example on aws:RequestTag/kubernetes-namespace and aws:RequestTag/kubernetes-service-account in a
    statement of both actions (EKS User Guide, "Create IAM role with trust policy required by EKS Pod
    Identity", pod-id-role.html); the tags it adds to the AssumeRole request are eks-cluster-arn,
    eks-cluster-name, kubernetes-namespace, kubernetes-service-account, kubernetes-pod-name and
    kubernetes-pod-uid (pod-id-abac.html, "List of session tags added by EKS Pod Identity"; on by default,
    no association here sets disableSessionTags). The cluster's ARN holds its account and region, so
    eks-cluster-arn pins the role to this stack's account and this cluster.
    aws:SourceAccount / aws:SourceArn are not used: EKS documents them for the cluster role's trust
    (eks.amazonaws.com, cross-service-confused-deputy-prevention.html), not for pods.eks.amazonaws.com, and a
    condition on a key the service does not send would refuse every assumption.
    aws-cdk-lib 2.275.0 aws-iam/lib/principals.js: PrincipalWithConditions adds its conditions to the
    principal's statement, SessionTagsPrincipal adds sts:TagSession to that same statement."""
    return (
        iam.ServicePrincipal("pods.eks.amazonaws.com")
        .with_conditions(
            {
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-arn": cluster_arn,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": service_account,
                }
            }
        )
        .with_session_tags()
    )


class Observability(Construct):
    """The add-on, its Pod Identity role and association, the Pod Identity agent, and the log groups."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        cluster_name: str,
        serving_namespace: str,
        logs_key: kms.IKey,
        retention: logs.RetentionDays,
        nodes: Sequence[IDependable],
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_groups = {
            kind: logs.LogGroup(
                self,
                f"Logs-{kind}",
                log_group_name=container_insights_log_group(cluster_name, kind),
                retention=retention,
                encryption_key=logs_key,
                removal_policy=cdk.RemovalPolicy.DESTROY,
            )
            for kind in CONTAINER_INSIGHTS_LOG_KINDS
        }
        self.application_logs = self.log_groups["application"]
        self._agent_access(cluster, cluster_name)
        self.addon = eks.Addon(
            self,
            "CloudWatchObservability",
            cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
            addon_name=CLOUDWATCH_OBSERVABILITY_ADDON,
            addon_version=versions.CLOUDWATCH_OBSERVABILITY_VERSION,
            configuration_values=addon_configuration(cluster_name, serving_namespace, cdk.Stack.of(self).region),
        )
        # Log groups first, credentials before the agents, nodes to run on; the destroy runs in reverse
        # (docs/DECISIONS.md, "The CloudWatch add-on's DependsOn").
        self.addon.node.add_dependency(*self.log_groups.values(), self.agent, self.association, *nodes)

    def _agent_access(self, cluster: eks.Cluster, cluster_name: str) -> None:
        """The agents' role, the Pod Identity agent and the association that hands the role to their service account."""
        self.role = iam.Role(
            self,
            "AgentRole",
            assumed_by=pod_identity_principal(cluster.cluster_arn, CLOUDWATCH_NAMESPACE, CLOUDWATCH_SERVICE_ACCOUNT),
            description=f"CloudWatch agent and Fluent Bit of {cluster_name} (Pod Identity)",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy")],
        )
        self.agent = eks.Addon(
            self,
            "PodIdentityAgent",
            cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
            addon_name=POD_IDENTITY_AGENT_ADDON,
        )
        self.association = eks.CfnPodIdentityAssociation(
            self,
            "AgentAccess",
            cluster_name=cluster.cluster_name,
            namespace=CLOUDWATCH_NAMESPACE,
            service_account=CLOUDWATCH_SERVICE_ACCOUNT,
            role_arn=self.role.role_arn,
        )
