"""Names the cluster's parts share: node labels, the GPU taint, namespaces. Plain values, no CDK, so
the stacks, the charts and the ops commands agree without importing each other."""
from __future__ import annotations

from . import names

SYSTEM_LABELS = {"role": "system"}
GPU_LABELS = {"role": "gpu-worker"}
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "true"
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
KUBERAY_NAMESPACE = "kuberay-system"
# The operator's Helm release. Its pods carry app.kubernetes.io/name and app.kubernetes.io/instance =
# this name (kuberay helm-chart/kuberay-operator/templates/deployment.yaml and _helpers.tpl, v1.7.0).
KUBERAY_RELEASE = "kuberay-operator"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# The Kubernetes group of the in-VPC verify runner (an EKS access entry), bound to a read-only role.
VERIFY_GROUP = "pd-inference-verify"


def verify_runner_name(stage: str) -> str:
    """The CodeBuild project (and the prefix of its source bucket) that runs `ops verify` in the VPC."""
    return names.verify_runner_name(stage)
