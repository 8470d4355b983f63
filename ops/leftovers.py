"""`leftovers`: what a destroyed stage left in its account and region, with the aws CLI command that removes each.

`cdk destroy` keeps the stage's KMS keys (CDK's default removal policy for a key is RETAIN: the Kubernetes
secrets key of <stage>-cluster, the log groups' key of <stage>-network); a log group its stack deleted stays
too when a writer created it again. CloudFormation lists a deleted stack's resources for 90 days: read-only
calls find them there (ListStacks, then ListStackResources by stack id) and check that each still exists (KMS
DescribeKey, Logs DescribeLogGroups). Nothing is removed here: the commands are printed for the operator.
"""

from __future__ import annotations

import shlex

from clients.report import Report
from config.names import STACK_PARTS, stack_name
from config.schema import StageConfig

from .aws_clients import Clients
from .errors import AWS_ERRORS, aws_fix, describe, error_code

DELETED = "DELETE_COMPLETE"
KEY = "AWS::KMS::Key"
LOG_GROUP = "AWS::Logs::LogGroup"
KEY_GOING = ("PendingDeletion", "PendingReplicaDeletion")


def run(cfg: StageConfig, clients: Clients) -> Report:
    report = Report("leftovers", cfg.stage)
    try:
        stacks = _stacks(cfg, clients)
        live = [f"{s['StackName']} ({s['StackStatus']})" for s in stacks if s["StackStatus"] != DELETED]
        if live:
            report.add(
                "stage stacks",
                "fail",
                f"still deployed: {', '.join(live)}: its keys and log groups are in use",
                f"destroy it first (scripts/cdk destroy -c stage={cfg.stage} '{cfg.stage}/*'), then run leftovers",
            )
            return report
        for stack in stacks:
            for kind, physical_id in _kept(clients, stack["StackId"]):
                if kind == KEY:
                    _key(cfg, clients, report, physical_id, stack["StackName"])
                else:
                    _log_group(cfg, clients, report, physical_id, stack["StackName"])
    except AWS_ERRORS as exc:
        report.add("leftovers", "fail", describe(exc), aws_fix(exc))
        return report
    if not report.checks:
        known = "deleted in the last 90 days" if stacks else "deployed or deleted in the last 90 days"
        report.add("leftovers", "pass", f"nothing left in {cfg.region} by the stacks of {cfg.stage} {known}")
    return report


def _stacks(cfg: StageConfig, clients: Clients) -> list[dict]:
    """The stage's stacks CloudFormation knows: live ones, and those deleted in the last 90 days."""
    wanted = {stack_name(cfg.stage, part) for part in STACK_PARTS}
    pages = clients("cloudformation").get_paginator("list_stacks").paginate()
    return [stack for page in pages for stack in page["StackSummaries"] if stack["StackName"] in wanted]


def _kept(clients: Clients, stack_id: str) -> list[tuple[str, str]]:
    """The KMS keys and log groups a deleted stack had (a deleted stack is named by its id alone)."""
    pages = clients("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack_id)
    return [
        (r["ResourceType"], r["PhysicalResourceId"])
        for page in pages
        for r in page["StackResourceSummaries"]
        if r["ResourceType"] in (KEY, LOG_GROUP) and r.get("PhysicalResourceId")
    ]


def _key(cfg: StageConfig, clients: Clients, report: Report, key_id: str, stack: str) -> None:
    try:
        key = clients("kms").describe_key(KeyId=key_id)["KeyMetadata"]
    except AWS_ERRORS as exc:
        if error_code(exc) == "NotFoundException":
            return
        raise
    name = f"KMS key {key_id}"
    if key["KeyState"] in KEY_GOING:
        report.add(name, "skip", f"deletion already scheduled ({key.get('DeletionDate', 'date unknown')})")
        return
    report.add(
        name,
        "warn",
        f"{key.get('Description') or 'no description'} ({key['KeyState']}; kept by {stack})",
        f"aws kms schedule-key-deletion --region {cfg.region} --key-id {shlex.quote(key_id)} "
        "--pending-window-in-days 30",
    )


def _log_group(cfg: StageConfig, clients: Clients, report: Report, group: str, stack: str) -> None:
    found = clients("logs").describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    if any(g["logGroupName"] == group for g in found):
        report.add(
            f"log group {group}",
            "warn",
            f"still there after its stack {stack} was deleted",
            f"aws logs delete-log-group --region {cfg.region} --log-group-name {shlex.quote(group)}",
        )
