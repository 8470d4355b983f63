"""Fake nodes made from the stage's nodegroups, as EKS and the kubelet would register them: the
nodegroup's labels and taints, the well-known labels the kubelet and EKS set, a pod CIDR, and the
instance type's capacity with the device plugins' resources (nvidia.com/gpu, vpc.amazonaws.com/efa).
kwok keeps them Ready and heartbeating (the node-lease stage) and runs the pods bound to them.

What is not modelled: EKS's kube-reserved and eviction allowances (allocatable equals capacity here),
and the VPC CNI's per-instance pod limit (a pod limit of 110, the kubelet's default)."""

from __future__ import annotations

import ipaddress
from typing import Any

from config.instance_types import INSTANCE_TYPES
from config.schema import StageConfig
from config.topology import EFA_RESOURCE, GPU_LABELS, GPU_RESOURCE, GPU_TAINT_KEY, GPU_TAINT_VALUE, SYSTEM_LABELS

from .control_plane import CLUSTER_CIDR

# kwok manages only nodes that carry this annotation (kwok --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
# A pod CIDR per node, from the cluster range: /24 as kube-controller-manager's node IPAM would give.
POD_SUBNET_PREFIX = 24
MAX_PODS = 110


def _node(
    name: str,
    *,
    instance_type: str,
    zone: str,
    region: str,
    nodegroup: str,
    capacity_type: str,
    labels: dict[str, str],
    taints: list[dict[str, str]],
    pod_cidr: str,
) -> dict[str, Any]:
    spec = INSTANCE_TYPES[instance_type]
    capacity = {
        "cpu": str(spec.vcpus),
        "memory": f"{spec.memory_gib}Gi",
        "pods": str(MAX_PODS),
        "ephemeral-storage": "100Gi",
    }
    if spec.gpus:
        capacity[GPU_RESOURCE] = str(spec.gpus)
    if spec.efa_interfaces:
        capacity[EFA_RESOURCE] = str(spec.efa_interfaces)
    well_known = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": region,
        "eks.amazonaws.com/nodegroup": nodegroup,
        "eks.amazonaws.com/capacityType": capacity_type,
        "type": "kwok",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": dict(KWOK_ANNOTATION), "labels": {**well_known, **labels}},
        "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr], "taints": taints},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux", "kubeletVersion": ""},
        },
    }


def stage_nodes(cfg: StageConfig, kubernetes_version: str) -> list[dict[str, Any]]:
    """One node per system node (desired size) and per GPU node (count), named as their nodegroups."""
    subnets = ipaddress.ip_network(CLUSTER_CIDR).subnets(new_prefix=POD_SUBNET_PREFIX)
    zones = list(cfg.availability_zones)
    nodes = []
    system = cfg.system_nodegroup
    for index in range(system.desired_size):
        nodes.append(
            _node(
                f"system-{index}",
                instance_type=system.instance_type,
                zone=zones[index % len(zones)],
                region=cfg.region,
                nodegroup="system",
                capacity_type="ON_DEMAND",
                labels=dict(SYSTEM_LABELS),
                taints=[],
                pod_cidr=str(next(subnets)),
            )
        )
    gpu = cfg.gpu_nodegroup
    taint = {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}
    for index in range(gpu.count):
        nodes.append(
            _node(
                f"gpu-{index}",
                instance_type=gpu.instance_type,
                zone=cfg.gpu_availability_zone,
                region=cfg.region,
                nodegroup="gpu",
                capacity_type="SPOT" if gpu.capacity_type == "spot" else "ON_DEMAND",
                labels=dict(GPU_LABELS),
                taints=[dict(taint)],
                pod_cidr=str(next(subnets)),
            )
        )
    for node in nodes:
        node["status"]["nodeInfo"]["kubeletVersion"] = kubernetes_version
    return nodes
