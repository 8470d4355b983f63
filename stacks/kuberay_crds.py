"""The KubeRay CRDs, applied server-side before the kuberay-operator release is installed or upgraded.

Helm never upgrades a chart's crds/, so without this step a chart bump runs the new operator against the old
CRDs (docs/DECISIONS.md, "KubeRay 1.6.2"). The step is a Lambda-backed custom resource whose handler
(kuberay_crds_handler/index.py) pulls the release's chart and applies its crds/; it runs exactly like the
cluster's kubectl handler: its role (the access entry that makes it a cluster admin), its layers (the
stage's kubectl layer with helm and kubectl, the AWS CLI) and its subnets and security group.

Its times come from the handler's bounded steps (kuberay_crds_handler/index.py WORST_CASE_SECONDS): the Lambda's
timeout is that worst case plus a start-up headroom, and the custom resource's ServiceTimeout (CloudFormation's
AWS::CloudFormation::CustomResource property, 1 to 3600 s, default 3600; aws-cdk-lib CustomResourceProps
`serviceTimeout`) a minute more, so a handler that never answers fails the stack in minutes, not an hour."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from config import versions

from .kuberay_crds_handler import index as handler

HANDLER_DIR = Path(__file__).resolve().parent / "kuberay_crds_handler"
RESOURCE_TYPE = "Custom::KubeRayCrds"
# The Lambda's start-up (a cold start in the VPC, the imports) beside the handler's own worst case.
STARTUP_HEADROOM_SECONDS = 60
LAMBDA_TIMEOUT = cdk.Duration.seconds(handler.WORST_CASE_SECONDS + STARTUP_HEADROOM_SECONDS)
# CloudFormation's wait: the Lambda's timeout and a minute for the invoke and the answer's way back.
SERVICE_TIMEOUT = cdk.Duration.seconds(LAMBDA_TIMEOUT.to_seconds() + 60)


@dataclass(frozen=True)
class KubeRayCrdsProps:
    cluster: eks.Cluster
    kubectl_layer: lambda_.ILayerVersion
    pin: versions.HelmChartPin  # the chart and its repository
    version: str  # the release's chart version (the stage file's addons.kuberay_operator)
    subnet_group: str  # the kubectl handler's subnets: the cluster's control-plane group


def _provider_function(cluster: eks.Cluster) -> lambda_.Function:
    provider = cluster.kubectl_provider
    assert provider is not None  # the cluster stack's kubectl_provider_options make one
    return cast(lambda_.Function, provider.node.find_child("Handler"))


class KubeRayCrds(Construct):
    """`resource` is the custom resource: the operator's release depends on it."""

    def __init__(self, scope: Construct, construct_id: str, *, props: KubeRayCrdsProps) -> None:
        super().__init__(scope, construct_id)
        cluster = props.cluster
        kubectl = _provider_function(cluster)
        awscli = cast(lambda_.ILayerVersion, cluster.kubectl_provider.node.find_child("AwsCliLayer"))  # type: ignore[union-attr]
        self.function = lambda_.Function(
            self,
            "Handler",
            description="Applies the KubeRay chart's CRDs server-side before the chart (Helm never upgrades them)",
            # The kubectl handler's runtime (aws-eks-v2 kubectl-provider.js), whose AWS CLI layer it shares.
            runtime=lambda_.Runtime.determine_latest_python_runtime(self),
            handler="index.handler",
            code=lambda_.Code.from_asset(str(HANDLER_DIR), exclude=["__pycache__", "*.pyc"]),
            timeout=LAMBDA_TIMEOUT,
            memory_size=1024,
            role=cast(iam.IRole, kubectl.role),
            layers=[awscli, props.kubectl_layer],
            vpc=cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_group_name=props.subnet_group),
            security_groups=[cluster.cluster_security_group],
            environment={"AWS_STS_REGIONAL_ENDPOINTS": "regional"},
        )
        self.resource = cdk.CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            service_timeout=SERVICE_TIMEOUT,
            resource_type=RESOURCE_TYPE,
            properties={
                "ClusterName": cluster.cluster_name,
                "Chart": props.pin.chart,
                "Repository": props.pin.repository,
                "Version": props.version,
            },
        )
        # As the kubectl handler's own resources: only once its access entry is in force.
        self.resource.node.add_dependency(cluster.node.find_child("KubectlReadyBarrier"))
