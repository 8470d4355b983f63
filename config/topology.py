"""What several modules must agree on: node labels, the GPU taint, namespaces, Ray's ports and the
Services KubeRay creates, the add-on names, the verify runner's source, the rendered file names. Plain
values, no CDK, so the stacks, the charts and the ops commands agree without importing each other.
tests/test_shared_names.py fails when a module outside this file and config/names.py repeats a port
number or a Service-name suffix."""

from __future__ import annotations

from typing import TypedDict

from . import names

SYSTEM_LABELS = {"role": "system"}
GPU_LABELS = {"role": "gpu-worker"}
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"


class Toleration(TypedDict):
    """A toleration's fields, named as Kubernetes and k8s.Toleration's keywords both name them: a Helm value as
    it is, and a `typed(k8s.Toleration, **GPU_TOLERATION)` whose fields mypy checks (charts/ray_pods.py)."""

    key: str
    operator: str
    effect: str


GPU_TOLERATION: Toleration = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
KUBERAY_NAMESPACE = "kuberay-system"
# The operator's Helm release. Its pods carry app.kubernetes.io/name and app.kubernetes.io/instance =
# this name (kuberay helm-chart/kuberay-operator/templates/deployment.yaml and _helpers.tpl, 1.6.2).
KUBERAY_RELEASE = "kuberay-operator"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Ray's ports on the head (KubeRay 1.6.2's defaults, ray-operator/controllers/ray/utils/constant.go:
# DefaultGcsServerPort 6379, DefaultDashboardPort 8265, DefaultServingPort 8000, DefaultMetricsPort 8080,
# DefaultDashboardAgentListenPort 52365): the head container's named ports, what the network policies
# open, what `ops verify`, `ops bench` and `ops rehearse` connect to.
GCS_PORT = 6379
DASHBOARD_PORT = 8265
SERVE_PORT = 8000
METRICS_PORT = 8080  # `ray start --metrics-export-port`
DASHBOARD_AGENT_PORT = 52365  # the kubelet's probes on every Ray pod
GCS_PORT_NAME, DASHBOARD_PORT_NAME, SERVE_PORT_NAME = "gcs-server", "dashboard", "serve"
HEAD_PORTS = {GCS_PORT_NAME: GCS_PORT, DASHBOARD_PORT_NAME: DASHBOARD_PORT, SERVE_PORT_NAME: SERVE_PORT}
# NIXL's own Prometheus exporter on a PD worker (charts/worker_env.py sets it): NIXL_TELEMETRY_PROMETHEUS_PORT,
# NIXL's default 9090 stated (ai-dynamo/nixl src/plugins/telemetry/prometheus/README.md), outside Ray's
# ports above, its worker ports 10002-19999 and the side channels from 20000. The container port's name is how
# the CloudWatch scraper finds it (stacks/observability.py); verify reads it through the API server's pod proxy.
NIXL_METRICS_PORT = 9090
NIXL_METRICS_PORT_NAME = "nixl-metrics"
# Where each side's NIXL side channel listens (base + a per-replica offset): Ray's own defaults, set
# explicitly in the Serve config so the ports the network policies must admit are visible.
NIXL_PORT_BASE = {"prefill": 20000, "decode": 22000}

# EKS add-ons that deliver the Hugging Face token as a file: the Pod Identity agent and the AWS
# Secrets and Configuration Provider (which brings the Secrets Store CSI driver with it).
POD_IDENTITY_AGENT_ADDON = "eks-pod-identity-agent"
SECRETS_PROVIDER_ADDON = "aws-secrets-store-csi-driver-provider"

# The CloudWatch Observability add-on (stacks/observability.py): its namespace, its service account, and the
# deployment-mode agent that scrapes the Ray pods, which a NetworkPolicy admits by the operator's labels.
# Why: docs/DECISIONS.md, "NetworkPolicies from the flows KubeRay, Ray and vLLM really make".
CLOUDWATCH_NAMESPACE = "amazon-cloudwatch"
CLOUDWATCH_SERVICE_ACCOUNT = "cloudwatch-agent"
RAY_SCRAPER_NAME = "ray-metrics-scraper"
RAY_SCRAPER_POD_LABELS = {"app.kubernetes.io/instance": f"{CLOUDWATCH_NAMESPACE}.{RAY_SCRAPER_NAME}"}
# KubeRay names the Ray container's metrics port `metrics` (8080 by default) on every Ray pod
# (ray-operator/controllers/ray/utils/constant.go, MetricsPortName / DefaultMetricsPort; set in
# common/pod.go). The scraper finds it by that name; the NetworkPolicy admits its number.
RAY_METRICS_PORT = METRICS_PORT
RAY_METRICS_PORT_NAME = "metrics"

# What `cdk synth` writes for review (charts/render.py) and `ops diff` compares: <outdir>/k8s/<stage>/.
RENDERED_DIR = "k8s"
INFERENCE_FILE = "inference.yaml"
SERVE_CONFIG_FILE = "serve-config.yaml"
HELM_RELEASES_FILE = "helm-releases.yaml"
EKS_ADDONS_FILE = "eks-addons.yaml"
RENDERED_FILES = (INFERENCE_FILE, SERVE_CONFIG_FILE, HELM_RELEASES_FILE, EKS_ADDONS_FILE)

# The verify runner (stacks/verify_runner.py) and what uploads to it (ops/remote.py): the object key of
# the source, the requirements it installs and the commands that install them.
VERIFY_SOURCE_KEY = "source.zip"
VERIFY_REQUIREMENTS = "requirements-ops.txt"
VERIFY_CONSTRAINTS = "constraints.txt"
# requirements-ops.txt at constraints.txt's pins, with their dependencies, each with its wheel's sha256
# (scripts/lock_ops.sh writes it).
VERIFY_LOCK = "requirements-ops.lock"


def install_ops_command(venv: str) -> str:
    """Installs what `python -m ops` needs into the virtual environment `venv`: only the wheels whose hashes
    the lock names (pip's hash-checking mode: every dependency must be listed, hashed and pinned; pip
    documentation, "Secure installs"), never an sdist's build step."""
    return f"{venv}/bin/pip install --quiet --require-hashes --only-binary=:all: -r {VERIFY_LOCK}"


# The runner's buildspec (stacks/verify_runner.py); the pipeline's verify step installs the same into .ops.
VERIFY_INSTALL_COMMANDS = ("python -m venv /tmp/ops", install_ops_command("/tmp/ops"))


def serve_service(service_name: str) -> str:
    """The Service KubeRay creates for a RayService's Serve endpoint."""
    return f"{service_name}-serve-svc"


def head_service(service_name: str) -> str:
    """The Service KubeRay creates for a RayService's head (dashboard, GCS)."""
    return f"{service_name}-head-svc"


def serve_address(service_name: str, namespace: str) -> str:
    """The in-cluster address of the Serve endpoint: host and port."""
    return f"{serve_service(service_name)}.{namespace}.svc:{SERVE_PORT}"


def verify_source_bucket(stage: str, account: str, region: str) -> str:
    """The verify runner's source bucket (account and region may be CloudFormation tokens)."""
    return names.verify_source_bucket(stage, account, region)


# The Kubernetes group of the in-VPC verify runner (an EKS access entry), bound to a read-only role.
VERIFY_GROUP = "pd-inference-verify"


def verify_runner_name(stage: str) -> str:
    """The CodeBuild project (and the prefix of its source bucket) that runs `ops verify` in the VPC."""
    return names.verify_runner_name(stage)


# What the CloudWatch Observability add-on writes, read by the stack (dashboard, alarms, log groups) and by
# `ops verify` (ops/telemetry.py): Container Insights' namespace, the namespace the agent's Prometheus scrape
# of the Ray pods writes to (EMF), and Container Insights' log groups (kind: application, dataplane, host,
# performance, prometheus).
CLOUDWATCH_OBSERVABILITY_ADDON = "amazon-cloudwatch-observability"
CONTAINER_INSIGHTS_NAMESPACE = "ContainerInsights"
RAY_METRICS_NAMESPACE = "ContainerInsights/Prometheus"
container_insights_log_group = names.container_insights_log_group
