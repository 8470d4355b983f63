"""The in-VPC verify runner: a CodeBuild project in the stage's private subnets that runs
`python -m ops verify` against the cluster's private endpoint. The pipeline's post-deploy step (and an
operator without a bastion) uploads the project's source to its bucket and starts it:
`python -m ops verify-remote --stage NAME`.

The project is a plain CloudFormation resource with a hand-written, least-privilege role: loading the
CodeBuild L2 module alone costs about 0.12 s on every synth of every stage.
"""
from __future__ import annotations

import json
from typing import Mapping, Optional

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config.topology import (VERIFY_GROUP, VERIFY_INSTALL_COMMANDS, VERIFY_SOURCE_KEY, verify_runner_name,
                             verify_source_bucket)

from .network import PRIVATE

SOURCE_KEY = VERIFY_SOURCE_KEY
VERIFY_WAIT_SECONDS = 1800
BUILD_IMAGE = "aws/codebuild/standard:7.0"


def buildspec(stage: str) -> dict:
    return {
        "version": "0.2",
        "phases": {
            "install": {"runtime-versions": {"python": "3.11"}, "commands": list(VERIFY_INSTALL_COMMANDS)},
            "build": {"commands": [
                f"/tmp/ops/bin/python -m ops verify --stage {stage} --wait {VERIFY_WAIT_SECONDS}",
            ]},
        },
    }


class VerifyRunner(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, stage: str, cluster: eks.Cluster, vpc: ec2.IVpc,
                 key: kms.IKey, logs_key: kms.IKey, log_retention: logs.RetentionDays,
                 application_logs: Optional[logs.ILogGroup] = None, tags: Optional[Mapping[str, str]] = None) -> None:
        """`application_logs`: the cluster's container log group when the stage collects them (verify reads it).
        `tags`: the stage's tags, written on the project in the template: CDK's tagging reaches only the resources
        it models, and the project is a plain CloudFormation resource. (Stack tags that a deployment passes,
        as `cdk deploy` does, CloudFormation also propagates; this keeps the tags in the template, seen in
        `cdk diff`, however the stack is deployed.)"""
        super().__init__(scope, construct_id)
        name = verify_runner_name(stage)
        stack = cdk.Stack.of(self)
        self.bucket = s3.Bucket(
            self, "Source", bucket_name=verify_source_bucket(stage, cdk.Aws.ACCOUNT_ID, cdk.Aws.REGION),
            encryption=s3.BucketEncryption.KMS, encryption_key=key, bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(7),
                                              noncurrent_version_expiration=cdk.Duration.days(1))],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.log_group = logs.LogGroup(self, "Logs", retention=log_retention, encryption_key=logs_key,
                                       removal_policy=cdk.RemovalPolicy.DESTROY)
        subnets = vpc.select_subnets(subnet_group_name=PRIVATE)
        prefix = f"arn:aws:ec2:{stack.region}:{stack.account}"
        statements = [
            # its source, nothing else of the bucket
            {"Action": ["s3:GetObject", "s3:GetObjectVersion"], "Resource": self.bucket.arn_for_objects(SOURCE_KEY)},
            {"Action": ["s3:GetBucketAcl", "s3:GetBucketLocation"], "Resource": self.bucket.bucket_arn},
            {"Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], "Resource": key.key_arn},
            {"Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": self.log_group.log_group_arn},
            {"Action": "eks:DescribeCluster", "Resource": cluster.cluster_arn},
            # CodeBuild in a VPC: describe calls have no resource-level permissions; the interface
            # permission is limited to CodeBuild and to this stage's private subnets.
            {"Action": ["ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:DescribeDhcpOptions",
                        "ec2:DescribeNetworkInterfaces", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets",
                        "ec2:DescribeVpcs"], "Resource": "*"},
            {"Action": "ec2:CreateNetworkInterfacePermission", "Resource": f"{prefix}:network-interface/*",
             "Condition": {"StringEquals": {"ec2:AuthorizedService": "codebuild.amazonaws.com"},
                           "ArnEquals": {"ec2:Subnet": [f"{prefix}:subnet/{s}" for s in subnets.subnet_ids]}}},
        ]
        if application_logs is not None:
            # verify's telemetry check (ops/telemetry.py): ListMetrics has no resource-level permissions;
            # the log streams of the cluster's application log group only.
            statements += [{"Action": "cloudwatch:ListMetrics", "Resource": "*"},
                           {"Action": "logs:DescribeLogStreams", "Resource": application_logs.log_group_arn}]
        self.role = iam.Role(  # the policy as one document: one jsii call, not one per statement
            self, "Role", assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),
            description=f"The {name} CodeBuild project",
            inline_policies={"verify-runner": iam.PolicyDocument.from_json({
                "Version": "2012-10-17", "Statement": [{"Effect": "Allow", **s} for s in statements]})},
        )
        project_arn = f"arn:aws:codebuild:{stack.region}:{stack.account}:project/{name}"
        self.project = cdk.CfnResource(self, "Project", type="AWS::CodeBuild::Project", properties={
            "Name": name,
            "Description": f"python -m ops verify --stage {stage}, from inside the VPC",
            "ServiceRole": self.role.role_arn,
            "Source": {"Type": "S3", "Location": f"{self.bucket.bucket_name}/{SOURCE_KEY}",
                       "BuildSpec": json.dumps(buildspec(stage), indent=2)},
            "Artifacts": {"Type": "NO_ARTIFACTS"},
            "Environment": {"Type": "LINUX_CONTAINER", "Image": BUILD_IMAGE, "ComputeType": "BUILD_GENERAL1_SMALL"},
            # The cluster security group (as the kubectl provider uses): reaches the private endpoint.
            "VpcConfig": {"VpcId": vpc.vpc_id, "Subnets": subnets.subnet_ids,
                          "SecurityGroupIds": [cluster.cluster_security_group_id]},
            "EncryptionKey": key.key_arn,
            "TimeoutInMinutes": 45,
            **({"Tags": [{"Key": tag, "Value": value} for tag, value in sorted(tags.items())]} if tags else {}),
            "LogsConfig": {"CloudWatchLogs": {"Status": "ENABLED", "GroupName": self.log_group.log_group_name}},
        })
        self.project_arn = project_arn
        # Kubernetes permissions come from RBAC bound to this group (the inference chart), not a policy.
        eks.CfnAccessEntry(self, "Access", cluster_name=cluster.cluster_name, principal_arn=self.role.role_arn,
                           kubernetes_groups=[VERIFY_GROUP], type="STANDARD")
