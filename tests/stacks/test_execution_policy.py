"""The scoped CloudFormation execution policy: derived from what the stacks create, so it cannot drift."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stacks import execution_policy

from ..helpers import ROOT, clean_env


def test_the_committed_policy_is_the_one_the_stacks_need():
    run = subprocess.run(
        [sys.executable, "scripts/cfn_execution_policy.py", "--check"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr


EXPECTED = ["cloudwatch", "codebuild", "ec2", "eks", "iam", "kms", "lambda", "logs", "s3", "ssm"]


def test_the_stage_templates_need_exactly_these_services(app_synth):
    templates = [
        app_synth.template(stage, stack) for stage in ("dev", "prod") for stack in ("network", "cluster", "serving")
    ]
    assert execution_policy.services(templates) == EXPECTED


def test_a_custom_resource_is_a_lambda_that_cloudformation_invokes():
    assert execution_policy.service("Custom::KubeRayCrds") == "lambda"


def test_a_service_the_table_does_not_name_stops_the_derivation():
    with pytest.raises(execution_policy.UnknownService, match=r"^AWS::SNS::Topic: no IAM service prefix"):
        execution_policy.service("AWS::SNS::Topic")


def test_the_policy_allows_those_services_and_nothing_else():
    document = execution_policy.policy_document(["s3", "ec2"])
    (statement,) = document["Statement"]
    assert (statement["Effect"], statement["Action"], statement["Resource"]) == ("Allow", ["ec2:*", "s3:*"], "*")
