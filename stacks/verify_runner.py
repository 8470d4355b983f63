"""The in-VPC verify runner: a CodeBuild project in the stage's private subnets that runs
`python -m ops verify` against the cluster's private endpoint. The pipeline's post-deploy step (and an
operator without a bastion) uploads the project's source to its bucket and starts it:
`python -m ops verify-remote --stage NAME`.

The project is a plain CloudFormation resource with a hand-written, least-privilege role: loading the
CodeBuild L2 module alone costs about 0.12 s on every synth of every stage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config.first_start import FirstStart
from config.topology import (
    VERIFY_GROUP,
    VERIFY_INSTALL_COMMANDS,
    VERIFY_SOURCE_KEY,
    verify_runner_name,
    verify_source_bucket,
)

from .log_encryption import lambda_log_groups
from .network import PRIVATE

# CDK's auto-delete-objects provider, a singleton at the stack's root (docs/DECISIONS.md, "The verify runner's source bucket").
AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
BUILD_IMAGE = "aws/codebuild/standard:7.0"


def buildspec(stage: str, wait_s: int) -> dict:
    return {
        "version": "0.2",
        "phases": {
            "install": {"runtime-versions": {"python": "3.11"}, "commands": list(VERIFY_INSTALL_COMMANDS)},
            "build": {
                "commands": [
                    f"/tmp/ops/bin/python -m ops verify --stage {stage} --wait {wait_s}",
                ]
            },
        },
    }


def eni_statements(prefix: str, vpc_id: str, subnet_ids: list[str]) -> list[dict[str, Any]]:
    """What CodeBuild needs to run a build in the VPC (CodeBuild User Guide, "Allow CodeBuild access to AWS
    services required to create a VPC network interface", auth-and-access-control-iam-identity-based-access-
    control.html), each write held to this stage's VPC: the describe calls have no resource-level
    permissions; creating and deleting an interface is allowed in this VPC only (ec2:Vpc, the VPC's ARN, a
    condition key of the network-interface, subnet and security-group resources: Service Authorization
    Reference, Amazon EC2); the interface permission to CodeBuild and this stage's private subnets only."""
    vpc = f"{prefix}:vpc/{vpc_id}"
    return [
        {
            "Action": [
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcs",
            ],
            "Resource": "*",
        },
        {
            "Action": ["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface"],
            "Resource": "*",
            "Condition": {"ArnEquals": {"ec2:Vpc": vpc}},
        },
        {
            "Action": "ec2:CreateNetworkInterfacePermission",
            "Resource": f"{prefix}:network-interface/*",
            "Condition": {
                "StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"},
                "ArnEquals": {"ec2:Subnet": [f"{prefix}:subnet/{s}" for s in subnet_ids]},
            },
        },
    ]


def runner_security_group(scope: Construct, name: str, vpc_id: str, cluster_group_id: str) -> ec2.CfnSecurityGroup:
    """The runner's own security group: out on TCP 443 only, to the cluster's security group (the private API
    endpoint's interfaces are in it: EKS User Guide, sec-group-reqs.html) and to anywhere, which the install
    phase needs (pip from PyPI through the NAT gateway; PyPI is a CDN of no fixed addresses) as does the
    build (S3 for its source, EKS, STS, CloudWatch Logs: public endpoints, no interface endpoints here).
    Nothing else: no node or pod port. DNS to the VPC's resolver is not subject to security groups (Amazon
    VPC User Guide, "Amazon DNS server"). The cluster's group admits 443 from it, which its default
    self-referencing rule would not."""
    group = ec2.CfnSecurityGroup(
        scope,
        "SecurityGroup",
        group_description=f"{name}: out on 443 only (the cluster API, AWS APIs, PyPI through NAT)",
        vpc_id=vpc_id,
        security_group_egress=[
            ec2.CfnSecurityGroup.EgressProperty(
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                destination_security_group_id=cluster_group_id,
                description="the cluster's private API endpoint",
            ),
            ec2.CfnSecurityGroup.EgressProperty(
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                cidr_ip="0.0.0.0/0",
                description="pip from PyPI through NAT; S3, EKS, STS and CloudWatch Logs APIs",
            ),
        ],
    )
    ec2.CfnSecurityGroupIngress(
        scope,
        "ApiFromRunner",
        group_id=cluster_group_id,
        ip_protocol="tcp",
        from_port=443,
        to_port=443,
        source_security_group_id=group.attr_group_id,
        description=f"{name} to the cluster's private API endpoint",
    )
    return group


class VerifyRunner(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        first_start: FirstStart,
        cluster: eks.Cluster,
        vpc: ec2.IVpc,
        logs_key: kms.IKey,
        log_retention: logs.RetentionDays,
        application_logs: logs.ILogGroup | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """`application_logs`: the cluster's container log group when the stage collects them (verify reads it).
        `tags`: the stage's tags, written on the project in the template: CDK's tagging reaches only the resources
        it models, and the project is a plain CloudFormation resource. (Stack tags that a deployment passes,
        as `cdk deploy` does, CloudFormation also propagates; this keeps the tags in the template, seen in
        `cdk diff`, however the stack is deployed.)"""
        super().__init__(scope, construct_id)
        name = verify_runner_name(stage)
        stack = cdk.Stack.of(self)
        self.bucket = self._source_bucket(stage)
        # The emptier's Lambda logs into a group with a retention and the stage's logs key (tests/stacks/test_hardening.py).
        lambda_log_groups([stack.node.find_child(AUTO_DELETE_PROVIDER)], logs_key, log_retention)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, encryption_key=logs_key, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        subnets = vpc.select_subnets(subnet_group_name=PRIVATE)
        self.role = self._role(name, self._statements(cluster, vpc, subnets, application_logs))
        self.security_group = runner_security_group(self, name, vpc.vpc_id, cluster.cluster_security_group_id)
        self.project = self._project(name, stage, first_start, vpc, subnets, tags)
        # Kubernetes permissions come from RBAC bound to this group (the inference chart), not a policy.
        eks.CfnAccessEntry(
            self,
            "Access",
            cluster_name=cluster.cluster_name,
            principal_arn=self.role.role_arn,
            kubernetes_groups=[VERIFY_GROUP],
            type="STANDARD",
        )

    def _source_bucket(self, stage: str) -> s3.Bucket:
        """SSE-S3, SSL-only, private, versioned and emptied on destroy (docs/DECISIONS.md, "The verify runner's
        source bucket")."""
        return s3.Bucket(
            self,
            "Source",
            bucket_name=verify_source_bucket(stage, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION),
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(expiration=cdk.Duration.days(7), noncurrent_version_expiration=cdk.Duration.days(1))
            ],
            removal_policy=cdk.RemovalPolicy.DESTROY,
            auto_delete_objects=True,
        )

    def _statements(
        self,
        cluster: eks.Cluster,
        vpc: ec2.IVpc,
        subnets: ec2.SelectedSubnets,
        application_logs: logs.ILogGroup | None,
    ) -> list[dict[str, Any]]:
        """The role's permissions: its source, its logs, the cluster's endpoint, the VPC's interfaces, and
        verify's telemetry check where the stage collects logs."""
        stack = cdk.Stack.of(self)
        prefix = f"arn:aws:ec2:{stack.region}:{stack.account}"
        statements: list[dict[str, Any]] = [
            # its source, nothing else of the bucket
            {
                "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                "Resource": self.bucket.arn_for_objects(VERIFY_SOURCE_KEY),
            },
            {"Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": self.bucket.bucket_arn},
            {"Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": self.log_group.log_group_arn},
            {"Action": "eks:DescribeCluster", "Resource": cluster.cluster_arn},
            *eni_statements(prefix, vpc.vpc_id, subnets.subnet_ids),
        ]
        if application_logs is not None:
            # verify's telemetry check (ops/telemetry.py): ListMetrics has no resource-level permissions;
            # the log streams of the cluster's application log group only.
            statements += [
                {"Action": "cloudwatch:ListMetrics", "Resource": "*"},
                {"Action": "logs:DescribeLogStreams", "Resource": application_logs.log_group_arn},
            ]
        return statements

    def _role(self, name: str, statements: list[dict[str, Any]]) -> iam.Role:
        return iam.Role(  # the policy as one document: one jsii call, not one per statement
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"The {name} CodeBuild project",
            inline_policies={
                "verify-runner": iam.PolicyDocument.from_json(
                    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **s} for s in statements]}
                )
            },
        )

    def _project(
        self,
        name: str,
        stage: str,
        first_start: FirstStart,
        vpc: ec2.IVpc,
        subnets: ec2.SelectedSubnets,
        tags: Mapping[str, str] | None,
    ) -> cdk.CfnResource:
        """The CodeBuild project; no EncryptionKey, as it has no artifacts (docs/DECISIONS.md, "The verify
        runner's source bucket"); a security group of its own, not the cluster's, which admits all from itself."""
        return cdk.CfnResource(
            self,
            "Project",
            type="AWS::CodeBuild::Project",
            properties={
                "Name": name,
                "Description": f"python -m ops verify --stage {stage}, from inside the VPC",
                "ServiceRole": self.role.role_arn,
                "Source": {
                    "Type": "S3",
                    "Location": f"{self.bucket.bucket_name}/{VERIFY_SOURCE_KEY}",
                    "BuildSpec": json.dumps(buildspec(stage, first_start.verify_wait_s), indent=2),
                },
                "Artifacts": {"Type": "NO_ARTIFACTS"},
                "Environment": {"Type": "LINUX_CONTAINER", "Image": BUILD_IMAGE, "ComputeType": "BUILD_GENERAL1_SMALL"},
                "VpcConfig": {
                    "VpcId": vpc.vpc_id,
                    "Subnets": subnets.subnet_ids,
                    "SecurityGroupIds": [self.security_group.attr_group_id],
                },
                "TimeoutInMinutes": first_start.verify_timeout_minutes,
                **({"Tags": [{"Key": tag, "Value": value} for tag, value in sorted(tags.items())]} if tags else {}),
                "LogsConfig": {"CloudWatchLogs": {"Status": "ENABLED", "GroupName": self.log_group.log_group_name}},
            },
        )
