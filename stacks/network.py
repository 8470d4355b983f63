"""The VPC: public and private subnets over the stage's AZs, NAT, flow logs, a closed default SG."""
from __future__ import annotations

from typing import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from config.schema import Network

from .retention import retention


class NetworkStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, zones: Sequence[str], network: Network,
                 log_retention_days: int, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        flow_log_group = logs.LogGroup(
            self, "FlowLogs",
            retention=retention(log_retention_days),
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.vpc = ec2.Vpc(
            self, "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(network.vpc_cidr),
            availability_zones=list(zones),  # literal names from the stage file: no lookup
            nat_gateways=network.nat_gateways,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=19),
            ],
            flow_logs={
                "all-traffic": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_log_group),
                    traffic_type=ec2.FlowLogTrafficType.ALL,
                ),
            },
        )
        # Subnet roles for load balancers the cluster may create (AWS Load Balancer Controller, Services).
        for subnet in self.vpc.public_subnets:
            cdk.Tags.of(subnet).add("kubernetes.io/role/elb", "1")
        for subnet in self.vpc.private_subnets:
            cdk.Tags.of(subnet).add("kubernetes.io/role/internal-elb", "1")

