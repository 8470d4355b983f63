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
# A version update of the GPU nodegroup (new AMI or launch template version) replaces one node at a time and
# terminates it before launching its replacement, so it never runs more GPU instances than the group has:
# no instance beyond max_size to fit in the vCPU quota, the AZ's capacity or the placement group.
# EKS API Reference, NodegroupUpdateConfig (API_NodegroupUpdateConfig.html): updateStrategy DEFAULT "launches
# the new instances first, before terminating the old instances"; MINIMAL "terminates the old instances before
# launching the new instances ... useful in scenarios where you are constrained to resources or costs (for
# example, with hardware accelerators such as GPUs)"; maxUnavailable "The maximum number of nodes unavailable
# at once during a version update", minimum 1, maximum 100. The default (no UpdateConfig) is DEFAULT with
# maxUnavailable 1, whose scale-up phase raises the Auto Scaling group's maximum and desired size by the larger
# of "Up to twice the number of Availability Zones that the Auto Scaling group is deployed in" and maxUnavailable
# (EKS User Guide, "Understand each phase of node updates", managed-node-update-behavior.html): up to 2 more
# GPU instances for this one-AZ group, above max_size (docs/OPERATIONS.md, "Nodegroup updates").
# aws-cdk-lib 2.275.0's aws_eks_v2 Nodegroup takes maxUnavailable (validated: 1 to 100 and not above maxSize)
# and renders UpdateConfig from it and maxUnavailablePercentage only (aws-eks-v2/lib/managed-nodegroup.js,
# validateUpdateConfig and the CfnNodegroup's updateConfig), so the strategy goes on the CfnNodegroup;
# CloudFormation's AWS::EKS::Nodegroup schema has UpdateConfig.UpdateStrategy, enum DEFAULT | MINIMAL (as
# cfn-lint ships it).
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
