"""verify-remote: uploads the checkout to the runner's bucket, starts the runner and reports its
outcome (moto for S3, STS and CodeBuild; botocore's Stubber for a failed build)."""
from __future__ import annotations

import io
import zipfile

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops import remote

from ..helpers import ROOT


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        session = boto3.session.Session(region_name="us-west-2")
        session.client("s3").create_bucket(Bucket="pd-inference-dev-verify-123456789012-us-west-2",
                                           CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        role = session.client("iam").create_role(RoleName="runner", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        session.client("codebuild").create_project(
            name="pd-inference-dev-verify", source={"type": "S3", "location": "b/source.zip"},
            artifacts={"type": "NO_ARTIFACTS"}, serviceRole=role,
            environment={"type": "LINUX_CONTAINER", "image": "aws/codebuild/standard:7.0",
                         "computeType": "BUILD_GENERAL1_SMALL"})
        yield session


def test_package_holds_what_the_runner_needs_and_nothing_local():
    names = set(zipfile.ZipFile(io.BytesIO(remote.package(ROOT))).namelist())
    assert {"ops/__main__.py", "config/dev.yaml", "requirements-ops.txt", "constraints.txt"} <= names
    assert not [n for n in names if n.startswith((".venv", "node_modules/", ".git/", "cdk.out", "tests/",
                                                  "bench-results/"))]


def test_successful_runner_build_passes(aws, dev):
    report = remote.run(dev, aws, ROOT, poll=0, sleep=lambda s: None)
    (check,) = report.checks
    assert check.status == "pass" and check.detail.startswith("pd-inference-dev-verify:")
    body = aws.client("s3").get_object(Bucket="pd-inference-dev-verify-123456789012-us-west-2",
                                       Key="source.zip")["Body"].read()
    assert "ops/verify.py" in zipfile.ZipFile(io.BytesIO(body)).namelist()


def test_failed_runner_build_fails_with_its_log_link(aws, dev):
    codebuild = aws.client("codebuild")
    stub = Stubber(codebuild)
    stub.add_response("start_build", {"build": {"id": "pd-inference-dev-verify:1", "buildStatus": "IN_PROGRESS"}})
    stub.add_response("batch_get_builds", {"builds": [{"id": "pd-inference-dev-verify:1", "buildStatus": "FAILED",
                                                       "logs": {"deepLink": "https://console/logs"}}]})
    stub.activate()
    report = remote.run(dev, aws, ROOT, poll=0, sleep=lambda s: None, clients={"codebuild": codebuild})
    (check,) = report.checks
    assert (check.status, check.detail) == ("fail", "pd-inference-dev-verify:1 FAILED")
    assert check.fix.endswith("https://console/logs") and report.exit_code == 1


def test_missing_runner_says_to_deploy_the_stage_first(aws, tmp_path):
    from ..helpers import config_with
    cfg = config_with(tmp_path, "prod")
    report = remote.run(cfg, aws, ROOT, poll=0, sleep=lambda s: None)
    (check,) = report.checks
    assert check.status == "fail" and "NoSuchBucket" in check.detail
    assert check.fix == "deploy the stage first: the runner (pd-inference-prod-verify) is part of prod/Cluster"
