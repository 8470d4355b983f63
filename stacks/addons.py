"""Cluster add-ons: the two device plugins and the KubeRay operator (Helm), their namespaces, and the
VPC CNI (an EKS managed add-on) with its network policy agent on; every EKS add-on as a reviewer reads it.

The values are plain functions so tests can check every key against the chart's default values.yaml
(Helm ignores a misspelt value silently).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import aws_cdk as cdk
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_lambda as lambda_
from constructs import Construct, IDependable

from config import versions
from config.schema import Addons
from config.topology import GPU_LABELS, GPU_TOLERATION, KUBERAY_NAMESPACE, KUBERAY_RELEASE, SYSTEM_LABELS

from .kuberay_crds import KubeRayCrds, KubeRayCrdsProps


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
    # Its chart's CRDs are applied by the KubeRayCrds step first (stacks/kuberay_crds.py). The release cannot skip
    # them: the kubectl handler reads SkipCrds but never passes --skip-crds (docs/DECISIONS.md).
    crds_step: bool = False


def _select_gpu_nodes() -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": key, "operator": "In", "values": [value]} for key, value in GPU_LABELS.items()
                ]
            }
        ]
    }


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
        HelmRelease(
            "NvidiaDevicePlugin",
            "nvidia-device-plugin",
            "kube-system",
            versions.NVIDIA_DEVICE_PLUGIN,
            addons.nvidia_device_plugin,
            nvidia_device_plugin_values(),
        ),
    ]
    if efa:
        releases.append(
            HelmRelease(
                "EfaDevicePlugin",
                "aws-efa-k8s-device-plugin",
                "kube-system",
                versions.EFA_DEVICE_PLUGIN,
                addons.efa_device_plugin,
                efa_device_plugin_values(),
            )
        )
    # wait: the RayService is applied only once the operator (and its CRDs) is up.
    releases.append(
        HelmRelease(
            "KubeRayOperator",
            KUBERAY_RELEASE,
            KUBERAY_NAMESPACE,
            versions.KUBERAY_OPERATOR,
            addons.kuberay_operator,
            kuberay_operator_values(),
            wait=True,
            crds_step=True,
        )
    )
    return releases


# Namespaces the app creates for add-ons, with Pod Security admission labels. The operator's pods
# (runAsNonRoot, no capabilities, RuntimeDefault seccomp in the chart's defaults) meet `restricted`.
ADDON_NAMESPACES = {
    KUBERAY_NAMESPACE: {
        "pod-security.kubernetes.io/enforce": "restricted",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    },
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


class ClusterAddons(Construct):
    """The add-on namespaces (with their Pod Security labels) and every Helm release of a stage, each
    release after its namespace and the nodes it runs on. `kuberay_operator` is the operator's release:
    the serving stack's RayService waits for it.

    The namespaces and releases are made through the cluster (`add_manifest`, `add_helm_chart`), so they
    stay the cluster's children with the logical IDs they had before this construct: a new logical ID
    would make CloudFormation install a second release of the same name before removing the first
    (docs/DECISIONS.md)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.Cluster,
        releases: Sequence[HelmRelease],
        nodes: Sequence[IDependable],
        kubectl_layer: lambda_.ILayerVersion,
        subnet_group: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.releases = list(releases)
        self.namespaces = {
            name: cluster.add_manifest(f"Namespace-{name}", namespace_manifest(name)) for name in ADDON_NAMESPACES
        }
        self.charts: dict[str, eks.HelmChart] = {}
        for release in self.releases:
            chart = install(cluster, release)
            if release.namespace in self.namespaces:
                chart.node.add_dependency(self.namespaces[release.namespace])
            # The device plugins and the operator need their nodes; the operator waits until ready.
            chart.node.add_dependency(*nodes)
            self.charts[release.release] = chart
        operator = next(r for r in self.releases if r.release == KUBERAY_RELEASE)
        self.kuberay_crds = KubeRayCrds(
            self,
            "KubeRayCrds",
            props=KubeRayCrdsProps(cluster, kubectl_layer, operator.pin, operator.version, subnet_group),
        )
        self.charts[KUBERAY_RELEASE].node.add_dependency(self.kuberay_crds.resource)

    @property
    def kuberay_operator(self) -> eks.HelmChart:
        return self.charts[KUBERAY_RELEASE]


# The VPC CNI's settings: its network policy agent enforces the chart's NetworkPolicies.
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}


def vpc_cni(scope: Construct, cluster: eks.Cluster) -> eks.Addon:
    """The VPC CNI as a managed add-on, with its network policy agent on. It keeps the logical ID `VpcCni`
    of the CfnAddon it replaces (a new one would create a second vpc-cni add-on: CloudFormation fails),
    and overwrites the self-managed CNI that a new cluster starts with (ResolveConflicts, which
    eks.Addon does not expose)."""
    addon = eks.Addon(
        scope,
        "VpcCni",
        cluster=cluster,  # type: ignore[arg-type]  # jsii's Cluster lacks ICluster's kubectl_provider_options
        addon_name="vpc-cni",
        configuration_values=VPC_CNI_CONFIGURATION,
    )
    resource = cast(cdk.CfnResource, addon.node.default_child)  # the CfnAddon
    resource.override_logical_id("VpcCni")
    resource.add_property_override("ResolveConflicts", "OVERWRITE")
    return addon


def eks_addon_entry(addon: eks.Addon) -> dict[str, Any]:
    """An EKS add-on as its template carries it, for the review copy: name, stack, version (pinned in
    config/versions.py, or EKS's pick) and configuration."""
    resource, stack = cast(eks.CfnAddon, addon.node.default_child), cdk.Stack.of(addon)
    entry: dict[str, Any] = {
        "addon": resource.addon_name,
        "stack": stack.stack_name,
        "version": resource.addon_version or "not pinned: EKS picks it when the add-on is created",
    }
    configuration = stack.resolve(resource.configuration_values)
    return entry | ({"configuration": json.loads(configuration)} if configuration else {})
