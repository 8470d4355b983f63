"""The EKS cluster with its nodegroups and add-ons. Nothing here changes when the served model does."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from config import versions
from config.first_start import FirstStart
from config.schema import Addons, Cluster, GpuNodegroup, Observability, SystemNodegroup

from . import addons
from .alarms import StageAlarms
from .dashboard import StageDashboard
from .efa import EfaNetwork
from .log_encryption import lambda_log_groups
from .network import CONTROL_PLANE
from .nodegroups import add_gpu_nodegroup, add_system_nodegroup
from .observability import Observability as ObservabilityAddon
from .verify_runner import VerifyRunner


def kubectl_layer(scope: Construct, version: str):
    """One kubectl layer per Kubernetes minor, imported on use; the schema admits exactly these minors."""
    module, name = versions.KUBECTL_LAYERS[version]
    return getattr(importlib.import_module(module), name)(scope, "KubectlLayer")


ALL_LOG_TYPES = [
    eks.ClusterLoggingTypes.API,
    eks.ClusterLoggingTypes.AUDIT,
    eks.ClusterLoggingTypes.AUTHENTICATOR,
    eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    eks.ClusterLoggingTypes.SCHEDULER,
]


def endpoint_access(cluster: Cluster) -> eks.EndpointAccess:
    endpoint = cluster.endpoint
    if not endpoint.public:
        return eks.EndpointAccess.PRIVATE
    base = eks.EndpointAccess.PUBLIC_AND_PRIVATE if endpoint.private_access else eks.EndpointAccess.PUBLIC
    return base.only_from(*endpoint.public_access_cidrs)


@dataclass(frozen=True)
class ClusterProps:
    """What a stage's cluster stack is built from (stacks/stage.py cluster_props). `first_start`: what the first start
    moves, which sizes the verify runner's wait. `tags`: the stage's, for resources CDK's tagging does not model."""

    stage: str
    vpc: ec2.IVpc
    logs_key: kms.IKey
    cluster_name: str
    cluster: Cluster
    system_nodegroup: SystemNodegroup
    gpu_nodegroup: GpuNodegroup
    gpu_zone: str
    efa_interfaces: int  # each GPU node's, which its EFA launch template attaches
    addon_versions: Addons
    observability: Observability
    serving_namespace: str
    first_start: FirstStart
    log_retention: logs.RetentionDays
    tags: Mapping[str, str] | None = None
    kv_floor_gbps: float | None = None  # the KV transfer's floor (PD mode), the KvTransferSlow alarm's threshold


class ClusterStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, props: ClusterProps, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.logs_key = props.logs_key
        self._control_plane(props)
        self._grant_admins(props.cluster)
        self._nodes(props)
        self._addons(props)
        self.observability: ObservabilityAddon | None = None
        self.alarms: StageAlarms | None = None
        self.dashboard: StageDashboard | None = None
        if props.observability.enabled:
            self._observe(props)
        self._verify_runner(props)
        # The EKS add-ons, in creation order (the review copy lists them: stacks/addons.py eks_addon_entry).
        self.eks_addons = [
            self.vpc_cni,
            *([self.observability.agent, self.observability.addon] if self.observability else []),
        ]
        provider = self.cluster.kubectl_provider
        assert provider is not None  # kubectl_provider_options in _control_plane makes one
        lambda_log_groups([provider, self.addons.kuberay_crds], self.logs_key, props.log_retention)
        self._outputs(props)

    def _control_plane(self, props: ClusterProps) -> None:
        """The envelope key, the control plane's log group (before the cluster, so EKS writes into a group
        with a retention, not a never-expiring one), the kubectl layer and the cluster."""
        cluster_name, cluster = props.cluster_name, props.cluster
        secrets_key = kms.Key(
            self,
            "SecretsKey",
            enable_key_rotation=True,
            description=f"EKS secrets envelope encryption for {cluster_name}",
        )
        control_plane_logs = logs.LogGroup(
            self,
            "ControlPlaneLogs",
            log_group_name=f"/aws/eks/{cluster_name}/cluster",
            retention=props.log_retention,
            encryption_key=self.logs_key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.kubectl_layer = kubectl_layer(self, cluster.kubernetes_version)
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=cluster_name,
            version=eks.KubernetesVersion.of(cluster.kubernetes_version),
            kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=self.kubectl_layer),
            vpc=props.vpc,
            vpc_subnets=[ec2.SubnetSelection(subnet_group_name=CONTROL_PLANE)],
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            cluster_logging=ALL_LOG_TYPES,
            secrets_encryption_key=secrets_key,
            endpoint_access=endpoint_access(cluster),
            output_config_command=False,
        )
        self.cluster.node.add_dependency(control_plane_logs)
        # aws_eks_v2.Cluster has no prop for it; the CfnCluster's default is EXTENDED (docs/DECISIONS.md).
        cast(cdk.CfnResource, self.cluster.node.default_child).add_property_override(
            "UpgradePolicy.SupportType", cluster.support_type.upper()
        )

    def _grant_admins(self, cluster: Cluster) -> None:
        for index, principal_arn in enumerate(cluster.admin_principal_arns):
            self.cluster.grant_access(
                f"Admin{index}",
                principal_arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    ),
                ],
            )

    def _nodes(self, props: ClusterProps) -> None:
        """The VPC CNI, the system nodegroup, EFA's network (when the GPU group uses it) and the GPU nodegroup."""
        gpu_nodegroup = props.gpu_nodegroup
        self.vpc_cni = addons.vpc_cni(self, self.cluster)
        self.system_nodegroup = add_system_nodegroup(self.cluster, group=props.system_nodegroup)
        self.efa = (
            EfaNetwork(
                self,
                "Efa",
                vpc=props.vpc,
                cluster_security_group_id=self.cluster.cluster_security_group_id,
                interface_count=props.efa_interfaces,
            )
            if gpu_nodegroup.efa
            else None
        )
        self.gpu_nodegroup = add_gpu_nodegroup(self.cluster, group=gpu_nodegroup, zone=props.gpu_zone, efa=self.efa)

    def _addons(self, props: ClusterProps) -> None:
        self.addons = addons.ClusterAddons(
            self,
            "Addons",
            cluster=self.cluster,
            releases=addons.helm_releases(props.addon_versions, efa=props.gpu_nodegroup.efa),
            nodes=[self.system_nodegroup, self.gpu_nodegroup],
            kubectl_layer=self.kubectl_layer,
            subnet_group=CONTROL_PLANE,
        )
        self.helm_releases = self.addons.releases
        self.kuberay_operator = self.addons.kuberay_operator

    def _verify_runner(self, props: ClusterProps) -> None:
        self.verify_runner = VerifyRunner(
            self,
            "VerifyRunner",
            stage=props.stage,
            first_start=props.first_start,
            cluster=self.cluster,
            vpc=props.vpc,
            logs_key=self.logs_key,
            log_retention=props.log_retention,
            tags=props.tags,
            application_logs=self.observability.application_logs if self.observability else None,
        )

    def _outputs(self, props: ClusterProps) -> None:
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)
        cdk.CfnOutput(self, "GpuAvailabilityZone", value=props.gpu_zone)
        cdk.CfnOutput(
            self,
            "UpdateKubeconfigCommand",
            value=f"aws eks update-kubeconfig --name {props.cluster_name} --region {self.region}",
        )

    def _observe(self, props: ClusterProps) -> None:
        """CloudWatch collection (the add-on), the stage's alarms and dashboard (docs/OBSERVABILITY.md)."""
        self.observability = ObservabilityAddon(
            self,
            "Observability",
            cluster=self.cluster,
            cluster_name=props.cluster_name,
            serving_namespace=props.serving_namespace,
            logs_key=self.logs_key,
            retention=props.log_retention,
            nodes=[self.system_nodegroup, self.gpu_nodegroup],
        )
        self.alarms = StageAlarms(
            self,
            "Alarms",
            cluster_name=props.cluster_name,
            settings=props.observability,
            application_logs=self.observability.application_logs,
            efa=props.gpu_nodegroup.efa,
            kv_floor_gbps=props.kv_floor_gbps,
        )
        self.dashboard = StageDashboard(
            self,
            "Dashboard",
            cluster_name=props.cluster_name,
            ttft_slo=props.observability.ttft_p99_slo_seconds,
            alarms=self.alarms.alarms,
            kv_floor_gbps=props.kv_floor_gbps,
        )
        cdk.CfnOutput(self, "DashboardName", value=self.dashboard.dashboard_name)
