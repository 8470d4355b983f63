"""A KMS key for a stack's CloudWatch log groups, usable by CloudWatch Logs for exactly those groups."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct


def logs_key(scope: Construct, construct_id: str, description: str) -> kms.Key:
    stack = cdk.Stack.of(scope)
    key = kms.Key(scope, construct_id, enable_key_rotation=True, description=description)
    key.add_to_resource_policy(
        iam.PolicyStatement.from_json(
            {  # one jsii call, not one per part
                "Sid": "CloudWatchLogsOfThisAccountAndRegion",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{stack.region}.amazonaws.com"},
                "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                "Resource": "*",  # in a key policy, "*" is this key
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{cdk.Aws.PARTITION}:logs:{stack.region}:{cdk.Aws.ACCOUNT_ID}:log-group:*"
                    }
                },
            }
        )
    )
    return key


def lambda_log_groups(scopes: Iterable[IConstruct], key: kms.IKey, retention) -> None:
    """A log group, with retention and encryption, for every Lambda function under `scopes` (CDK's own
    custom-resource handlers), which would otherwise log into a never-expiring group. The hardening
    tests check that no function of any stack is left without one."""
    from aws_cdk import aws_logs as logs

    functions = [
        c
        for scope in scopes
        for c in scope.node.find_all()
        if isinstance(c, cdk.CfnResource) and c.cfn_resource_type == "AWS::Lambda::Function"
    ]
    for construct in functions:
        group = logs.LogGroup(
            cast(Construct, construct.node.scope),  # a function's parent (the root holds none)
            "LogGroup",
            retention=retention,
            encryption_key=key,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        # Lambda's advanced logging: the function writes to this group (its execution role already
        # may write to any log group through AWSLambdaBasicExecutionRole).
        construct.add_property_override("LoggingConfig.LogGroup", group.log_group_name)
