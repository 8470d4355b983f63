"""cdk-nag (AwsSolutions, the v3 validation plugin) and the findings this app accepts, each on the
narrowest construct it applies to, with the reason. Anything not listed here fails the synth."""
from __future__ import annotations

import aws_cdk as cdk
from constructs import IConstruct

from .cluster import ClusterStack

_MANAGED = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


def _ack(scope: IConstruct, rule_id: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def enable_checks(app: cdk.App) -> None:
    from cdk_nag import AwsSolutionsChecks  # imported only when used: loading it costs ~0.1 s a synth

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge_findings(cluster_stack: ClusterStack) -> None:
    cluster = cluster_stack.cluster
    _ack(cluster.role, _MANAGED.format("AmazonEKSClusterPolicy"),
         "The EKS service role needs AmazonEKSClusterPolicy; AWS maintains it as EKS gains features.")
    for nodegroup in (cluster_stack.system_nodegroup, cluster_stack.gpu_nodegroup):
        role = nodegroup.role
        _ack(role, _MANAGED.format("AmazonEKSWorkerNodePolicy"),
             "EKS managed nodes must carry AmazonEKSWorkerNodePolicy to join the cluster.")
        _ack(role, _MANAGED.format("AmazonEKS_CNI_Policy"),
             "The VPC CNI on each node assigns pod IPs with AmazonEKS_CNI_Policy (EKS's documented setup).")
        _ack(role, _MANAGED.format("AmazonEC2ContainerRegistryReadOnly"),
             "Nodes pull the DLC Ray image and EKS add-on images from ECR; read-only access only.")
    provider = cluster.kubectl_provider
    _ack(provider, _MANAGED.format("service-role/AWSLambdaBasicExecutionRole"),
         "The kubectl provider Lambda (CDK-owned) writes its own logs; CDK attaches this policy.")
    _ack(provider, _MANAGED.format("service-role/AWSLambdaVPCAccessExecutionRole"),
         "The kubectl provider runs in the private subnets to reach the private API endpoint.")
    _ack(provider, _MANAGED.format("AmazonEC2ContainerRegistryReadOnly"),
         "CDK lets the kubectl provider pull Helm charts stored as OCI artifacts in ECR; read-only.")
    _ack(provider, 'AwsSolutions::AwsSolutions-IAM4[Policy::{"Fn::If":["ClusterKubectlProviderHandlerHasEcrPublic'
                   '69E09706",{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElastic'
                   'ContainerRegistryPublicReadOnly"]]},{"Ref":"AWS::NoValue"}]}]',
         "CDK grants the kubectl provider read access to public ECR only in partitions that have it.")
    _ack(provider, "AwsSolutions::AwsSolutions-IAM5[Resource::<ClusterKubectlProviderHandler2E05C68A.Arn>:*]",
         "The CDK provider framework invokes any version of its own kubectl handler function (Arn:*).")
    _ack(provider, "AwsSolutions::AwsSolutions-L1",
         "The kubectl provider's runtime is chosen by aws-cdk-lib (latest it supports); it moves with CDK.")
