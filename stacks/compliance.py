"""cdk-nag (AwsSolutions, the v3 validation plugin) and the findings this app accepts, each on the
narrowest construct it applies to, with the reason. Anything not listed here fails the synth."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from constructs import IConstruct

from .cluster import ClusterStack
from .verify_runner import VerifyRunner

_MANAGED = "AwsSolutions::AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


def _ack(scope: IConstruct, rule_id: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def _logical_id(scope: IConstruct, path: str) -> str:
    """The logical ID of the CloudFormation element at `path` under `scope` (construct ids joined by
    `/`): findings that name a CDK-owned resource by its hashed ID are acknowledged by where it is."""
    node = scope
    for part in path.split("/"):
        node = node.node.find_child(part)
    element = cast(cdk.CfnElement, node)  # the path ends at a CloudFormation element
    return cdk.Stack.of(element).resolve(element.logical_id)


def enable_checks(app: cdk.App) -> None:
    from cdk_nag import AwsSolutionsChecks  # imported only when used: loading it costs ~0.1 s a synth

    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))


def acknowledge_findings(cluster_stack: ClusterStack) -> None:
    _acknowledge_node_roles(cluster_stack)
    provider = cluster_stack.cluster.kubectl_provider
    assert provider is not None  # the cluster stack's kubectl_provider_options make one
    _acknowledge_kubectl_provider(provider)
    _ack(
        cluster_stack.addons.kuberay_crds.function,
        "AwsSolutions::AwsSolutions-L1",
        "The KubeRay CRD step runs on the kubectl provider's runtime, whose AWS CLI layer it shares; it moves with CDK.",
    )
    _acknowledge_verify_runner(cluster_stack.verify_runner)
    if cluster_stack.observability is not None:
        _ack(
            cluster_stack.observability.role,
            _MANAGED.format("CloudWatchAgentServerPolicy"),
            "The CloudWatch agent and Fluent Bit (Pod Identity, their service account only) need AWS's "
            "CloudWatchAgentServerPolicy, which AWS keeps in step with what the agent calls.",
        )


def _acknowledge_node_roles(cluster_stack: ClusterStack) -> None:
    """The AWS managed policies EKS requires on the cluster's service role and the nodes' roles."""
    _ack(
        cluster_stack.cluster.role,
        _MANAGED.format("AmazonEKSClusterPolicy"),
        "The EKS service role needs AmazonEKSClusterPolicy; AWS maintains it as EKS gains features.",
    )
    for nodegroup in (cluster_stack.system_nodegroup, cluster_stack.gpu_nodegroup):
        role = nodegroup.role
        _ack(
            role,
            _MANAGED.format("AmazonEKSWorkerNodePolicy"),
            "EKS managed nodes must carry AmazonEKSWorkerNodePolicy to join the cluster.",
        )
        _ack(
            role,
            _MANAGED.format("AmazonEKS_CNI_Policy"),
            "The VPC CNI on each node assigns pod IPs with AmazonEKS_CNI_Policy (EKS's documented setup).",
        )
        _ack(
            role,
            _MANAGED.format("AmazonEC2ContainerRegistryReadOnly"),
            "Nodes pull the DLC Ray image and EKS add-on images from ECR; read-only access only.",
        )


def _acknowledge_kubectl_provider(provider: IConstruct) -> None:
    """CDK's kubectl provider: its managed policies, its own handler's versions, its runtime."""
    handler = _logical_id(provider, "Handler/Resource")
    has_ecr_public = _logical_id(provider, "Handler/HasEcrPublic")
    _ack(
        provider,
        _MANAGED.format("service-role/AWSLambdaBasicExecutionRole"),
        "The kubectl provider Lambda (CDK-owned) writes its own logs; CDK attaches this policy.",
    )
    _ack(
        provider,
        _MANAGED.format("service-role/AWSLambdaVPCAccessExecutionRole"),
        "The kubectl provider runs in the private subnets to reach the private API endpoint.",
    )
    _ack(
        provider,
        _MANAGED.format("AmazonEC2ContainerRegistryReadOnly"),
        "CDK lets the kubectl provider pull Helm charts stored as OCI artifacts in ECR; read-only.",
    )
    _ack(
        provider,
        f'AwsSolutions::AwsSolutions-IAM4[Policy::{{"Fn::If":["{has_ecr_public}",{{"Fn::Join":["",["arn:",'
        '{"Ref":"AWS::Partition"},":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"]]},'
        '{"Ref":"AWS::NoValue"}]}]',
        "CDK grants the kubectl provider read access to public ECR only in partitions that have it.",
    )
    _ack(
        provider,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::<{handler}.Arn>:*]",
        "The CDK provider framework invokes any version of its own kubectl handler function (Arn:*).",
    )
    _ack(
        provider,
        "AwsSolutions::AwsSolutions-L1",
        "The kubectl provider's runtime is chosen by aws-cdk-lib (latest it supports); it moves with CDK.",
    )


def _acknowledge_verify_runner(runner: VerifyRunner) -> None:
    _ack(
        runner.bucket,
        "AwsSolutions::AwsSolutions-S1",
        "The bucket holds only the project's source for the verify runner, expires it after 7 days, "
        "and is KMS-encrypted and SSL-only; access logging would add a log bucket per stage for it.",
    )
    _ack(
        runner.role,
        "AwsSolutions::AwsSolutions-IAM5[Resource::*]",
        "CodeBuild in a VPC must call ec2:Describe* and create its network interfaces, which have no "
        "resource-level ARNs before they exist; cloudwatch:ListMetrics (verify's telemetry check) has no "
        "resource-level permissions.",
    )
    region = cdk.Stack.of(runner).region  # literal: every stage names its region (partition literals on)
    _ack(
        runner.role,
        f"AwsSolutions::AwsSolutions-IAM5[Resource::arn:aws:ec2:{region}:{_account(runner)}:network-interface/*]",
        "CodeBuild attaches permissions to the interfaces it creates; limited to CodeBuild and to the "
        "stage's private subnets by conditions.",
    )


def _account(scope: IConstruct) -> str:
    """The account as cdk-nag writes it in a finding: the stage file's literal, else CloudFormation's."""
    stack = cdk.Stack.of(scope)
    return stack.account if not cdk.Token.is_unresolved(stack.account) else "<AWS::AccountId>"


def acknowledge_pipeline(pipeline) -> None:
    """CDK Pipelines' own build projects, roles and artifact bucket (not the stages: those are
    checked like any stage). Every finding is CDK Pipelines' fixed shape; the reasons say why each is
    acceptable. Needs the pipeline built (`build_pipeline()`) so its projects exist."""
    from aws_cdk import aws_codebuild as codebuild

    stack = cdk.Stack.of(pipeline)
    account = _account(pipeline)
    region = stack.region
    iam5 = "AwsSolutions::AwsSolutions-IAM5[{}]"
    fixed = {
        "Action::kms:GenerateDataKey*": "CDK Pipelines' grant to encrypt artifacts with the pipeline's own key.",
        "Action::kms:ReEncrypt*": "CDK Pipelines' grant to use the pipeline's own artifact key (KMS family).",
        "Action::s3:Abort*": "CDK Pipelines' artifact-bucket grant (upload side), on the pipeline's own bucket.",
        "Action::s3:DeleteObject*": "CDK Pipelines' artifact-bucket grant (overwrite side), on its own bucket.",
        "Action::s3:GetBucket*": "CDK Pipelines' artifact-bucket read grant, on the pipeline's own bucket.",
        "Action::s3:GetObject*": "CDK Pipelines' artifact-bucket read grant, on the pipeline's own bucket.",
        "Action::s3:List*": "CDK Pipelines' artifact-bucket list grant, on the pipeline's own bucket.",
        "Resource::*": "CodeBuild's report and VPC describe calls, and EKS's DescribeAddonConfiguration (the "
        "add-on check), have no resource-level permissions.",
        f"Resource::<{stack.resolve(pipeline.pipeline.artifact_bucket.node.default_child.logical_id)}.Arn>/*": "Objects of the pipeline's own artifact bucket.",
        f"Resource::arn:*:iam::{account}:role/*": "The self-mutation step assumes the CDK bootstrap roles (cdk-hnb659fds-*) of the target account.",
        f"Resource::arn:aws:codebuild:{region}:{account}:report-group/*": "CDK Pipelines' default report groups.",
        f"Resource::arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/*": "CodeBuild log groups of the pipeline.",
    }
    for finding, reason in fixed.items():
        _ack(pipeline, iam5.format(finding), reason)
    for construct in pipeline.node.find_all():
        if isinstance(construct, codebuild.CfnProject):
            project_id = stack.resolve(construct.logical_id)
            _ack(
                pipeline,
                iam5.format(f"Resource::arn:aws:codebuild:{region}:{account}:report-group/<{project_id}>-*"),
                "The project's own report groups (CodeBuild's default grant).",
            )
            _ack(
                pipeline,
                iam5.format(f"Resource::arn:aws:logs:{region}:{account}:log-group:/aws/codebuild/<{project_id}>:*"),
                "The project's own log streams (CodeBuild's default grant).",
            )
    _ack(
        pipeline,
        "AwsSolutions::AwsSolutions-CB4",
        "CDK Pipelines' build projects write only to the artifact bucket, which is encrypted with the "
        "pipeline's KMS key; their build environment holds no data at rest.",
    )
    _ack(
        pipeline.pipeline.artifact_bucket,
        "AwsSolutions::AwsSolutions-S1",
        "The artifact bucket is written only by the pipeline's own roles (CloudTrail records them); an "
        "access-log bucket for it would hold nothing more.",
    )
