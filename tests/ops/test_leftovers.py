"""leftovers against moto (KMS, CloudWatch Logs) and botocore's Stubber for CloudFormation (moto's needs packages
the project does not install): a stage never deployed, one destroyed, one still deployed, no credentials."""

from __future__ import annotations

import json

from botocore.stub import Stubber

from ops import leftovers
from ops.__main__ import main
from ops.aws_clients import Clients

REGION = "us-west-2"
STACK_ID = "arn:aws:cloudformation:us-west-2:123456789012:stack/{}/0f6d"


def _cloudformation(session, stacks, resources=None):
    """A CloudFormation client that answers ListStacks with `stacks` ({name: status}) and ListStackResources
    of each deleted one with `resources[name]` ([(type, physical id)])."""
    client = session.client("cloudformation", region_name=REGION)
    stub = Stubber(client)
    summaries = [
        {"StackId": STACK_ID.format(name), "StackName": name, "StackStatus": status, "CreationTime": "2026-01-01"}
        for name, status in stacks.items()
    ]
    stub.add_response("list_stacks", {"StackSummaries": summaries}, {})
    for name, kept in (resources or {}).items():
        rows = [
            {
                "LogicalResourceId": f"R{i}",
                "PhysicalResourceId": physical,
                "ResourceType": kind,
                "ResourceStatus": "DELETE_SKIPPED" if kind == leftovers.KEY else "DELETE_COMPLETE",
                "LastUpdatedTimestamp": "2026-01-02",
            }
            for i, (kind, physical) in enumerate(kept)
        ]
        stub.add_response(
            "list_stack_resources", {"StackResourceSummaries": rows}, {"StackName": STACK_ID.format(name)}
        )
    stub.activate()
    return client


def _run(dev, session, cloudformation):
    return leftovers.run(dev, Clients(session, REGION, overrides={"cloudformation": cloudformation}))


def test_a_stage_never_deployed_left_nothing(dev, aws):
    report = _run(dev, aws, _cloudformation(aws, {"prod-network": "CREATE_COMPLETE"}))
    assert [(c.name, c.status, c.detail) for c in report.checks] == [
        ("leftovers", "pass", "nothing left in us-west-2 by the stacks of dev deployed or deleted in the last 90 days")
    ]
    assert report.exit_code == 0


def test_a_destroyed_stage_lists_its_kept_keys_and_regrown_log_groups_with_their_commands(dev, aws):
    kms, logs = aws.client("kms"), aws.client("logs")
    secrets = kms.create_key(Description="EKS secrets envelope encryption for pd-inference-dev")["KeyMetadata"]["KeyId"]
    going = kms.create_key(Description="an older logs key")["KeyMetadata"]["KeyId"]
    kms.schedule_key_deletion(KeyId=going, PendingWindowInDays=7)
    logs.create_log_group(logGroupName="/aws/eks/pd-inference-dev/cluster")
    stacks = {"dev-network": "DELETE_COMPLETE", "dev-cluster": "DELETE_COMPLETE"}
    resources = {
        "dev-network": [(leftovers.KEY, going), (leftovers.LOG_GROUP, "dev-network-FlowLogs16C1943A-x1")],
        "dev-cluster": [(leftovers.KEY, secrets), (leftovers.LOG_GROUP, "/aws/eks/pd-inference-dev/cluster")],
    }
    report = _run(dev, aws, _cloudformation(aws, stacks, resources))
    shown = [(c.name, c.status, c.fix) for c in report.checks]
    assert shown[0][:2] == (f"KMS key {going}", "skip")
    assert shown[1:] == [
        (
            f"KMS key {secrets}",
            "warn",
            f"aws kms schedule-key-deletion --region us-west-2 --key-id {secrets} --pending-window-in-days 30",
        ),
        (
            "log group /aws/eks/pd-inference-dev/cluster",
            "warn",
            "aws logs delete-log-group --region us-west-2 --log-group-name /aws/eks/pd-inference-dev/cluster",
        ),
    ]
    assert (
        report.checks[1].detail == "EKS secrets envelope encryption for pd-inference-dev (Enabled; kept by dev-cluster)"
    )
    assert report.exit_code == 0


def test_a_stage_still_deployed_lists_nothing_and_exits_1(dev, aws, capsys):
    stacks = {"dev-network": "CREATE_COMPLETE", "dev-cluster": "DELETE_FAILED"}
    code = main(["leftovers", "--stage", "dev"], session=aws, clients={"cloudformation": _cloudformation(aws, stacks)})
    out = capsys.readouterr().out
    assert code == 1
    assert "stage stacks  FAIL    still deployed: dev-network (CREATE_COMPLETE), dev-cluster (DELETE_FAILED)" in out
    assert "-> destroy it first (scripts/cdk destroy -c stage=dev 'dev/*'), then run leftovers" in out


def test_no_credentials_is_the_failing_check_in_the_json_report(local_aws, capsys):
    assert main(["leftovers", "--stage", "dev", "--json"]) == 1
    (check,) = json.loads(capsys.readouterr().out)["checks"]
    assert (check["status"], check["detail"]) == ("fail", "no AWS credentials found")
    assert check["fix"] == "log in (aws sso login, or set AWS_PROFILE / AWS_ACCESS_KEY_ID) and run again"
