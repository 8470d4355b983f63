"""The VPC: public and private subnets over the stage's AZs, NAT, flow logs, a closed default SG."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.derived import SUBNET_LAYOUT
from config.schema import Network

from .log_encryption import lambda_log_groups, logs_key

PRIVATE = "private"  # nodes and pods
CONTROL_PLANE = "control-plane"  # the EKS control plane's network interfaces
# Only the control plane's ENIs (and the kubectl provider) live in CONTROL_PLANE, so network policies can tell
# the API server's proxy from pods by address. The AWS Load Balancer Controller picks subnets by the role tags
# below (docs/DECISIONS.md, "Subnet role tags").
ELB_ROLE_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_ROLE_TAG = "kubernetes.io/role/internal-elb"
_SUBNET_TYPES = {
    "public": ec2.SubnetType.PUBLIC,
    PRIVATE: ec2.SubnetType.PRIVATE_WITH_EGRESS,
    CONTROL_PLANE: ec2.SubnetType.PRIVATE_WITH_EGRESS,
}


@dataclass(frozen=True)
class NetworkProps:
    """What a stage's network stack is built from (stacks/stage.py network_props)."""

    zones: Sequence[str]
    network: Network
    log_retention: logs.RetentionDays


class NetworkStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: NetworkProps, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.props = props
        # One key for the stage's log groups (flow logs here; control plane, Lambda and runner logs in the cluster stack).
        self.logs_key = logs_key(
            self, "LogsKey", "CloudWatch Logs of the stage: flow logs, control plane, Lambda handlers, verify runner"
        )
        self.vpc = self._vpc(props)
        # ECR serves image layers from S3: a gateway endpoint keeps the Ray image's pulls off the NAT's per-GB charge.
        self.s3_endpoint = self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self.control_plane_cidrs = self._tag_subnets()
        # CDK's handler that empties the default security group: a singleton at the stack's root.
        handler = self.node.find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        lambda_log_groups([handler], self.logs_key, props.log_retention)

    def _vpc(self, props: NetworkProps) -> ec2.Vpc:
        """The VPC in the SUBNET_LAYOUT that config/derived.py checks the CIDR against, flow logs on."""
        flow_log_group = logs.LogGroup(
            self,
            "FlowLogs",
            retention=props.log_retention,
            encryption_key=self.logs_key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        return ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(props.network.vpc_cidr),
            availability_zones=list(props.zones),  # literal names from the stage file: no lookup
            nat_gateways=props.network.nat_gateways,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(name=group, subnet_type=_SUBNET_TYPES[group], cidr_mask=mask)
                for group, mask in SUBNET_LAYOUT
            ],
            flow_logs={
                "all-traffic": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                ),
            },
        )

    def _tag_subnets(self) -> list[str]:
        """Load balancer roles: internet-facing in the public subnets, internal in the node subnets, none in the
        control-plane subnets, whose CIDRs (returned) NetworkPolicies trust (docs/DECISIONS.md, "Subnet role tags")."""
        for subnet in self.vpc.public_subnets:
            cdk.Tags.of(subnet).add(ELB_ROLE_TAG, "1")
        for subnet in self.vpc.select_subnets(subnet_group_name=PRIVATE).subnets:
            cdk.Tags.of(subnet).add(INTERNAL_ELB_ROLE_TAG, "1")
        control_plane = self.vpc.select_subnets(subnet_group_name=CONTROL_PLANE).subnets
        for subnet in control_plane:
            for tag in (ELB_ROLE_TAG, INTERNAL_ELB_ROLE_TAG):
                cdk.Tags.of(subnet).remove(tag)
        return [s.ipv4_cidr_block for s in control_plane]
