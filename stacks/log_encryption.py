"""A KMS key for a stack's CloudWatch log groups, usable by CloudWatch Logs for exactly those groups."""
from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct


def logs_key(scope: Construct, construct_id: str, description: str) -> kms.Key:
    stack = cdk.Stack.of(scope)
    key = kms.Key(scope, construct_id, enable_key_rotation=True, description=description)
    key.add_to_resource_policy(iam.PolicyStatement(
        sid="CloudWatchLogsOfThisAccountAndRegion",
        principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
        actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
        resources=["*"],  # in a key policy, "*" is this key
        conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:*"}},
    ))
    return key


def lambda_log_groups(stack: cdk.Stack, key: kms.IKey, retention) -> None:  # noqa: ANN001 - logs.RetentionDays
    """A log group, with retention and encryption, for every Lambda function of the stack (CDK's own
    custom-resource handlers among them), which would otherwise log into a never-expiring group."""
    from aws_cdk import aws_logs as logs

    for construct in stack.node.find_all():
        if isinstance(construct, cdk.CfnResource) and construct.cfn_resource_type == "AWS::Lambda::Function":
            group = logs.LogGroup(construct.node.scope, "LogGroup", retention=retention, encryption_key=key,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
            # Lambda's advanced logging: the function writes to this group (its execution role already
            # may write to any log group through AWSLambdaBasicExecutionRole).
            construct.add_property_override("LoggingConfig.LogGroup", group.log_group_name)
