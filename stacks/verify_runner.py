"""The in-VPC verify runner: a CodeBuild project in the stage's private subnets that runs
`python -m ops verify` against the cluster's private endpoint. The pipeline's post-deploy step (and an
operator without a bastion) uploads the project's source to its bucket and starts it:
`python -m ops verify-remote --stage NAME`.
"""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config.topology import VERIFY_GROUP, verify_runner_name

from .network import PRIVATE

SOURCE_KEY = "source.zip"
VERIFY_WAIT_SECONDS = 1800


def buildspec(stage: str) -> codebuild.BuildSpec:
    return codebuild.BuildSpec.from_object({
        "version": "0.2",
        "phases": {
            "install": {"runtime-versions": {"python": "3.11"}, "commands": [
                "python -m venv /tmp/ops",
                "/tmp/ops/bin/pip install --quiet -r requirements-ops.txt -c constraints.txt",
            ]},
            "build": {"commands": [
                f"/tmp/ops/bin/python -m ops verify --stage {stage} --wait {VERIFY_WAIT_SECONDS}",
            ]},
        },
    })


class VerifyRunner(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, stage: str, cluster: eks.Cluster, vpc: ec2.IVpc,
                 key: kms.IKey, logs_key: kms.IKey, log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        name = verify_runner_name(stage)
        self.bucket = s3.Bucket(
            self, "Source", bucket_name=f"{name}-{cdk.Aws.ACCOUNT_ID}-{cdk.Aws.REGION}",
            encryption=s3.BucketEncryption.KMS, encryption_key=key, bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True,
            versioned=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(7),
                                              noncurrent_version_expiration=cdk.Duration.days(1))],
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        log_group = logs.LogGroup(self, "Logs", retention=log_retention, encryption_key=logs_key,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        self.project = codebuild.Project(
            self, "Project", project_name=name,
            description=f"python -m ops verify --stage {stage}, from inside the VPC",
            source=codebuild.Source.s3(bucket=self.bucket, path=SOURCE_KEY),
            build_spec=buildspec(stage),
            environment=codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                                                   compute_type=codebuild.ComputeType.SMALL),
            vpc=vpc, subnet_selection=ec2.SubnetSelection(subnet_group_name=PRIVATE),
            # The cluster security group (as the kubectl provider uses): reaches the private endpoint.
            security_groups=[cluster.cluster_security_group],
            encryption_key=key,
            timeout=cdk.Duration.minutes(45),
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=log_group)),
        )
        self.project.add_to_role_policy(iam.PolicyStatement(actions=["eks:DescribeCluster"],
                                                            resources=[cluster.cluster_arn]))
        # Kubernetes permissions come from RBAC bound to this group (the inference chart), not a policy.
        eks.CfnAccessEntry(self, "Access", cluster_name=cluster.cluster_name,
                           principal_arn=self.project.role.role_arn, kubernetes_groups=[VERIFY_GROUP],
                           type="STANDARD")
