"""What EFA needs on the GPU nodes, in one place, derived from the instance type.

No CDK construct knows EFA: the interfaces go into an L1 launch template (see nodegroups.py).
"""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class EfaNetwork(Construct):
    """The EFA security group (all traffic to and from itself) and the launch template's network
    interfaces: one EFA interface per network card that has one."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        cluster_security_group_id: str,
        interface_count: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            allow_all_outbound=False,
            description="EFA - all traffic between the GPU nodes EFA interfaces and nothing else",
        )
        self.security_group.add_ingress_rule(
            self.security_group, ec2.Port.all_traffic(), "EFA traffic from the GPU nodes"
        )
        self.security_group.add_egress_rule(self.security_group, ec2.Port.all_traffic(), "EFA traffic to the GPU nodes")
        self._groups = [self.security_group.security_group_id, cluster_security_group_id]
        self.interface_count = interface_count

    def network_interfaces(self) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
        """Card 0 carries the primary interface (device index 0); every further card an EFA interface
        at device index 1. The cluster security group is named on each interface because EKS stops
        adding it once the launch template names security groups. No subnet, no public IP."""
        return [
            ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                device_index=0 if card == 0 else 1,
                network_card_index=card,
                interface_type="efa",
                groups=self._groups,
                associate_public_ip_address=False,
                delete_on_termination=True,
            )
            for card in range(self.interface_count)
        ]
