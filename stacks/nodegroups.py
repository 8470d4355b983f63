"""The two managed nodegroups: `system` (operator, Ray head) and `gpu-worker` (vLLM engines)."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from config.schema import GpuNodegroup, SystemNodegroup
from config.topology import GPU_LABELS, GPU_TAINT_KEY, GPU_TAINT_VALUE, SYSTEM_LABELS

from .efa import EfaNetwork
from .network import PRIVATE

GPU_TAINT = eks.TaintSpec(key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=eks.TaintEffect.NO_SCHEDULE)
# EKS best practice: "Restrict access to the instance profile assigned to the worker node".
IMDS_HOP_LIMIT = 1
_CAPACITY = {"on_demand": eks.CapacityType.ON_DEMAND, "spot": eks.CapacityType.SPOT}
# A GPU nodegroup update terminates each node before launching its replacement (MINIMAL, one at a time),
# so it never runs more GPU instances than max_size; aws_eks_v2 cannot set the strategy, the CfnNodegroup can.
# docs/OPERATIONS.md, "Nodegroup updates", has what each strategy launches.
# Why: docs/DECISIONS.md, "GPU nodegroup updates: MINIMAL, one node at a time".
GPU_MAX_UNAVAILABLE = 1
GPU_UPDATE_STRATEGY = "MINIMAL"


def node_launch_template(
    scope: Construct,
    construct_id: str,
    *,
    root_volume_gib: int,
    instance_type: str | None = None,
    network_interfaces: list | None = None,
    placement_group: ec2.CfnPlacementGroup | None = None,
) -> ec2.CfnLaunchTemplate:
    """IMDSv2 only, with a response hop limit of 1: the answer cannot cross the extra hop into a pod's
    network namespace, so a pod that stays in its own namespace cannot read the node role's credentials.
    (A privileged pod, root on its node, can: SECURITY.md says what contains the privileged GPU workers.)
    Host-network daemonsets (VPC CNI, kube-proxy, the Pod Identity agent) still reach IMDS; pods that
    need AWS use EKS Pod Identity (SECURITY.md, "Instance metadata"). An encrypted gp3 root volume. The
    AMI type always stays on the nodegroup."""
    data = ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
        instance_type=instance_type,
        metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=IMDS_HOP_LIMIT,
        ),
        block_device_mappings=[
            ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                device_name="/dev/xvda",
                ebs=ec2.CfnLaunchTemplate.EbsProperty(
                    volume_size=root_volume_gib,
                    volume_type="gp3",
                    encrypted=True,
                    delete_on_termination=True,
                ),
            )
        ],
        network_interfaces=network_interfaces,
        placement=ec2.CfnLaunchTemplate.PlacementProperty(group_name=placement_group.ref)
        if placement_group is not None
        else None,
    )
    return ec2.CfnLaunchTemplate(scope, construct_id, launch_template_data=data)


def _spec(template: ec2.CfnLaunchTemplate) -> eks.LaunchTemplateSpec:
    return eks.LaunchTemplateSpec(id=template.ref, version=template.attr_latest_version_number)


def add_system_nodegroup(cluster: eks.Cluster, *, group: SystemNodegroup) -> eks.Nodegroup:
    template = node_launch_template(cluster.stack, "SystemLaunchTemplate", root_volume_gib=group.root_volume_gib)
    return cluster.add_nodegroup_capacity(
        "SystemNodegroup",
        ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
        instance_types=[ec2.InstanceType(group.instance_type)],
        min_size=group.min_size,
        desired_size=group.desired_size,
        max_size=group.max_size,
        labels=SYSTEM_LABELS,
        launch_template_spec=_spec(template),
        subnets=ec2.SubnetSelection(subnet_group_name=PRIVATE),
    )


def add_gpu_nodegroup(cluster: eks.Cluster, *, group: GpuNodegroup, zone: str, efa: EfaNetwork | None) -> eks.Nodegroup:
    """Pinned to exactly one private subnet, in the GPU AZ: EFA traffic cannot cross AZs. A cluster
    placement group (optional) packs the nodes closer, at the risk of InsufficientInstanceCapacity."""
    placement_group = (
        ec2.CfnPlacementGroup(cluster.stack, "GpuPlacementGroup", strategy="cluster") if group.placement_group else None
    )
    # The GPU instance type goes in the launch template, not the nodegroup: CDK's nodegroup checks the
    # AMI type against a GPU family list that lacks p5 and newer, and would refuse AL2023_X86_64_NVIDIA.
    template = node_launch_template(
        cluster.stack,
        "GpuLaunchTemplate",
        root_volume_gib=group.root_volume_gib,
        instance_type=group.instance_type,
        network_interfaces=efa.network_interfaces() if efa else None,
        placement_group=placement_group,
    )
    low, desired, high = group.sizes
    nodegroup = cluster.add_nodegroup_capacity(
        "GpuNodegroup",
        ami_type=eks.NodegroupAmiType.AL2023_X86_64_NVIDIA,
        capacity_type=_CAPACITY[group.capacity_type],
        min_size=low,
        desired_size=desired,
        max_size=high,
        labels=GPU_LABELS,
        taints=[GPU_TAINT],
        launch_template_spec=_spec(template),
        subnets=ec2.SubnetSelection(subnet_group_name=PRIVATE, availability_zones=[zone]),
        max_unavailable=GPU_MAX_UNAVAILABLE,
    )
    resource = cast(cdk.CfnResource, nodegroup.node.default_child)  # the CfnNodegroup
    resource.add_property_override("UpdateConfig.UpdateStrategy", GPU_UPDATE_STRATEGY)
    return nodegroup
