"""The CloudFormation execution policy that covers exactly the services the synthesized stacks create, for
`cdk bootstrap --cloudformation-execution-policies` in place of AdministratorAccess (docs/DEPLOYING.md).

A resource type names its service (`AWS::EC2::Subnet` -> ec2); a custom resource is a Lambda function that
CloudFormation invokes with the execution role (lambda). The table is an allowlist: a resource type of a
service it does not name stops the derivation, so a new service is a reviewed change of the policy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# The IAM service prefix of each CloudFormation namespace the stacks use.
SERVICE_PREFIXES = {
    "CloudWatch": "cloudwatch",
    "CodeBuild": "codebuild",
    "CodePipeline": "codepipeline",
    "EC2": "ec2",
    "EKS": "eks",
    "IAM": "iam",
    "KMS": "kms",
    "Lambda": "lambda",
    "Logs": "logs",
    "S3": "s3",
    "SSM": "ssm",
}
CUSTOM_RESOURCE_SERVICE = "lambda"


class UnknownService(Exception):
    """A resource type of a namespace SERVICE_PREFIXES does not name."""


def service(resource_type: str) -> str:
    if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
        return CUSTOM_RESOURCE_SERVICE
    parts = resource_type.split("::")
    if len(parts) != 3 or parts[0] != "AWS" or parts[1] not in SERVICE_PREFIXES:
        raise UnknownService(
            f"{resource_type}: no IAM service prefix for it in stacks/execution_policy.py SERVICE_PREFIXES"
        )
    return SERVICE_PREFIXES[parts[1]]


def services(templates: Iterable[dict[str, Any]]) -> list[str]:
    """The services the templates' resources belong to, sorted."""
    return sorted({service(r["Type"]) for t in templates for r in (t.get("Resources") or {}).values()})


def policy_document(names: Iterable[str]) -> dict[str, Any]:
    """An IAM policy allowing those services only (every action: CloudFormation creates, updates and deletes)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ServicesTheStacksCreate",
                "Effect": "Allow",
                "Action": [f"{name}:*" for name in sorted(names)],
                "Resource": "*",
            }
        ],
    }
