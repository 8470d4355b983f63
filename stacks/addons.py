"""Cluster add-ons installed with Helm: the two device plugins and the KubeRay operator.

The values are plain functions so tests can check every key against the chart's default values.yaml
(Helm ignores a misspelt value silently).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_eks_v2 as eks

from config import versions
from config.schema import Addons

from config.topology import GPU_LABELS, GPU_TOLERATION, KUBERAY_NAMESPACE, KUBERAY_RELEASE, SYSTEM_LABELS


@dataclass(frozen=True)
class HelmRelease:
    """What is installed, as a reviewer reads it: chart, version, repository, namespace, values."""

    construct_id: str
    release: str
    namespace: str
    pin: versions.HelmChartPin
    version: str
    values: dict[str, Any]
    create_namespace: bool = False
    wait: bool = False


def _select_gpu_nodes() -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": key, "operator": "In", "values": [value]} for key, value in GPU_LABELS.items()
    ]}]}


def nvidia_device_plugin_values() -> dict[str, Any]:
    # The chart's default affinity needs NFD/GFD labels that EKS nodes do not carry; select the GPU
    # nodes by our label instead. Its default tolerations already include the nvidia.com/gpu taint.
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": _select_gpu_nodes()}}}


def efa_device_plugin_values() -> dict[str, Any]:
    return {"nodeSelector": dict(GPU_LABELS), "tolerations": [dict(GPU_TOLERATION)]}


def kuberay_operator_values() -> dict[str, Any]:
    return {"nodeSelector": dict(SYSTEM_LABELS)}


def helm_releases(addons: Addons, *, efa: bool) -> list[HelmRelease]:
    """The releases of a stage, in install order."""
    releases = [
        HelmRelease("NvidiaDevicePlugin", "nvidia-device-plugin", "kube-system", versions.NVIDIA_DEVICE_PLUGIN,
                    addons.nvidia_device_plugin, nvidia_device_plugin_values()),
    ]
    if efa:
        releases.append(HelmRelease("EfaDevicePlugin", "aws-efa-k8s-device-plugin", "kube-system",
                                    versions.EFA_DEVICE_PLUGIN, addons.efa_device_plugin,
                                    efa_device_plugin_values()))
    # wait: the RayService is applied only once the operator (and its CRDs) is up.
    releases.append(HelmRelease("KubeRayOperator", KUBERAY_RELEASE, KUBERAY_NAMESPACE, versions.KUBERAY_OPERATOR,
                                addons.kuberay_operator, kuberay_operator_values(), wait=True))
    return releases


# Namespaces the app creates for add-ons, with Pod Security admission labels. The operator's pods
# (runAsNonRoot, no capabilities, RuntimeDefault seccomp in the chart's defaults) meet `restricted`.
ADDON_NAMESPACES = {
    KUBERAY_NAMESPACE: {"pod-security.kubernetes.io/enforce": "restricted",
                        "pod-security.kubernetes.io/warn": "restricted",
                        "pod-security.kubernetes.io/audit": "restricted"},
}


def namespace_manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": ADDON_NAMESPACES[name]}}


def install(cluster: eks.Cluster, release: HelmRelease) -> eks.HelmChart:
    return cluster.add_helm_chart(
        release.construct_id,
        chart=release.pin.chart,
        repository=release.pin.repository,
        version=release.version,
        release=release.release,
        namespace=release.namespace,
        create_namespace=release.create_namespace,
        wait=release.wait,
        values=release.values,
    )
