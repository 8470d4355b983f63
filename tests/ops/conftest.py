"""The diffs of these tests keep their synth output in one folder per test session (a worker's, under
pytest-xdist), not in the user's cache: every diff against this checkout's HEAD after the first copies the base.
The clone a diff test changes, and the pull request's checkout that is that clone."""

from __future__ import annotations

import subprocess

import boto3
import pytest
from moto import mock_aws

from ops.diff import synth_cache

from ..helpers import ROOT


@pytest.fixture(scope="session")
def session_synth_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("synth-cache")


@pytest.fixture(autouse=True)
def _synth_cache_of_the_session(session_synth_cache, monkeypatch):
    monkeypatch.setattr(synth_cache, "default_folder", lambda: session_synth_cache)


@pytest.fixture
def clone(tmp_path):
    """This repository's committed state, with a committer (the CDK CLI is this checkout's own: ops/diff/cfn_diff.py)."""
    repo = tmp_path / "main"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
    for key, value in (("user.email", "test@example.invalid"), ("user.name", "test")):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True)
    return repo


@pytest.fixture
def pull_request(clone):
    """The pull request's checkout: a clone of this repository's committed state."""
    return clone


@pytest.fixture
def aws(monkeypatch):
    """moto's AWS with test credentials and no profile from the environment: a session in us-west-2, the stages'
    region. A test module with AWS state of its own (a bucket, a project) defines its own fixture of this name."""
    for var in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.session.Session(region_name="us-west-2")


@pytest.fixture
def local_aws(monkeypatch, tmp_path):
    """No credentials, no profile, no endpoint override: each test adds the one thing it breaks."""
    for var in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_STS",
        "AWS_ENDPOINT_URL_EKS",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path
