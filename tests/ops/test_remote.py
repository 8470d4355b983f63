"""verify-remote: uploads the checkout to the runner's bucket, starts the runner and reports its
outcome (moto for S3, STS and CodeBuild; botocore's Stubber for a failed build)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import sysconfig
import zipfile

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from ops import remote
from ops.__main__ import main

from ..helpers import ROOT


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        session = boto3.session.Session(region_name="us-west-2")
        session.client("s3").create_bucket(
            Bucket="pd-inference-dev-verify-123456789012-us-west-2",
            CreateBucketConfiguration={"LocationConstraint": "us-west-2"},
        )
        role = session.client("iam").create_role(RoleName="runner", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        session.client("codebuild").create_project(
            name="pd-inference-dev-verify",
            source={"type": "S3", "location": "b/source.zip"},
            artifacts={"type": "NO_ARTIFACTS"},
            serviceRole=role,
            environment={
                "type": "LINUX_CONTAINER",
                "image": "aws/codebuild/standard:7.0",
                "computeType": "BUILD_GENERAL1_SMALL",
            },
        )
        yield session


def test_package_holds_what_the_runner_needs_and_nothing_local():
    names = set(zipfile.ZipFile(io.BytesIO(remote.package(ROOT))).namelist())
    assert {"ops/__main__.py", "config/dev.yaml", "requirements-ops.txt", "constraints.txt"} <= names
    assert not [
        n
        for n in names
        if n.startswith(
            (".venv", "node_modules/", ".git/", "cdk.out", "tests/", "bench-results/", ".rehearsal", ".env")
        )
    ]


def test_successful_runner_build_passes(aws, dev):
    report = remote.run(dev, aws, ROOT, poll=0, sleep=lambda s: None)
    (check,) = report.checks
    assert check.status == "pass" and check.detail.startswith("pd-inference-dev-verify:")
    body = (
        aws.client("s3")
        .get_object(Bucket="pd-inference-dev-verify-123456789012-us-west-2", Key="source.zip")["Body"]
        .read()
    )
    assert "ops/verify.py" in zipfile.ZipFile(io.BytesIO(body)).namelist()


def test_failed_runner_build_fails_with_its_log_link(aws, dev):
    codebuild = aws.client("codebuild")
    stub = Stubber(codebuild)
    stub.add_response("start_build", {"build": {"id": "pd-inference-dev-verify:1", "buildStatus": "IN_PROGRESS"}})
    stub.add_response(
        "batch_get_builds",
        {
            "builds": [
                {
                    "id": "pd-inference-dev-verify:1",
                    "buildStatus": "FAILED",
                    "logs": {"deepLink": "https://console/logs"},
                }
            ]
        },
    )
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
    assert check.fix == (
        "deploy the stage first: the runner (pd-inference-prod-verify, bucket "
        "pd-inference-prod-verify-123456789012-us-west-2) is part of prod/Cluster"
    )


# --- what is uploaded: only what git tracks, and only what the runner needs --------------------------


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


TRACKED = [
    "charts/__init__.py",
    "config/__init__.py",
    "config/dev.yaml",
    "constraints.txt",
    "ops/__init__.py",
    "ops/__main__.py",
    "requirements-ops.lock",
    "requirements-ops.txt",
]
# What a developer's checkout holds besides: secrets, keys, ignored and untracked files, and tracked files
# the runner does not need. None of it may leave the machine.
PLANTED = {
    ".env": "AWS_SECRET_ACCESS_KEY=planted\n",
    ".aws/credentials": "[default]\naws_secret_access_key = planted\n",
    "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n",
    "ops/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n",
    "config/.env": "HF_TOKEN=planted\n",
    "ops/debug.log": "ignored by .gitignore\n",
    ".venv/lib/site.py": "ignored by .gitignore\n",
    "ops/scratch.py": "untracked\n",
    "config/local.yaml": "untracked\n",
    "cdk.out/manifest.json": "{}\n",
}


@pytest.fixture
def checkout(tmp_path):
    repo = tmp_path / "checkout"
    for name in TRACKED + ["README.md", "tests/test_x.py", "docs/x.md", ".gitignore"]:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("*.log\n.venv/\ncdk.out/\n" if name == ".gitignore" else f"# {name}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    for name, text in PLANTED.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / "ops" / "link.py").symlink_to(repo / ".env")
    _git(repo, "add", "-f", "ops/link.py")  # a tracked link to a secret is not followed either
    return repo


def _names(root) -> list[str]:
    return sorted(zipfile.ZipFile(io.BytesIO(remote.package(root))).namelist())


def test_upload_holds_only_the_runners_tracked_files(checkout):
    assert _names(checkout) == TRACKED


def test_upload_never_holds_secrets_keys_ignored_or_untracked_files(checkout):
    archive = zipfile.ZipFile(io.BytesIO(remote.package(checkout)))
    assert not set(PLANTED) & set(archive.namelist())
    assert all(b"planted" not in archive.read(name) for name in archive.namelist())


def test_upload_carries_local_edits_of_tracked_files(checkout):
    (checkout / "ops" / "__main__.py").write_text("# edited, not committed\n")
    archive = zipfile.ZipFile(io.BytesIO(remote.package(checkout)))
    assert archive.read("ops/__main__.py") == b"# edited, not committed\n"


def test_upload_of_this_checkout_is_what_git_tracks_under_the_runner_paths():
    tracked = set(_git(ROOT, "ls-files", "--", *remote.RUNNER_PATHS).split())
    names = set(_names(ROOT))
    assert names <= tracked and {n for n in tracked if (ROOT / n).is_file()} == names
    assert not [
        n
        for n in names
        if not n.startswith(("clients/", "ops/", "config/", "charts/"))
        and n not in ("requirements-ops.txt", "constraints.txt", "requirements-ops.lock")
    ]


def test_the_upload_alone_runs_python_m_ops_verify(tmp_path):
    """Unpacked on its own, the upload imports everything `python -m ops verify` loads (and loads the
    stage files): no module comes from outside it. The probe runs with `python -S` and only the venv's
    site-packages on PYTHONPATH: the project's editable install (a .pth finder that maps ops, config,
    serving_lab ... to this checkout) is not loaded, so a package missing from the upload fails the import
    instead of being found in the checkout."""
    zipfile.ZipFile(io.BytesIO(remote.package(ROOT))).extractall(tmp_path)
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['ops', 'verify', '--help']\n"
        "try:\n    runpy.run_module('ops', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "import ops.verify, ops.preflight, ops.remote, ops.errors, clients.kube, ops.eks_token, clients.nixl\n"
        "from config import load_stages\n"
        "assert [c.stage for c in load_stages()] == ['dev', 'prod']\n"
        "from pathlib import Path\n"
        "root = Path.cwd().resolve()\n"
        "ours = [Path(m.__file__).resolve() for m in list(sys.modules.values()) if getattr(m, '__file__', None)\n"
        "        and m.__name__.split('.')[0] in ('ops', 'config', 'charts', 'stacks', 'app', 'serving_lab')]\n"
        "outside = [str(p) for p in ours if not p.is_relative_to(root)]\n"
        "print('outside:', outside)\n"
        "print('editable:', sorted(m for m in sys.modules if m.startswith('__editable__')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(site_packages)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage: python -m ops verify" in proc.stdout
    assert proc.stdout.strip().splitlines()[-2:] == ["outside: []", "editable: []"]


def test_the_upload_lists_bench_and_rehearse_as_absent_and_refuses_them_in_one_line(tmp_path):
    """The upload has no serving_lab/: `python -m ops --help` still lists every command, and `bench` is one
    line and exit 2, not a traceback (the same isolated interpreter as above)."""
    zipfile.ZipFile(io.BytesIO(remote.package(ROOT))).extractall(tmp_path)
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(site_packages)}

    def ops(*argv):
        return subprocess.run(
            [sys.executable, "-S", "-m", "ops", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )

    listing = ops("--help")
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert " ".join(listing.stdout.split()).count("not in this copy of the project (no module serving_lab)") == 2
    refused = ops("bench", "--stage", "dev")
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "bench: not in this copy of the project (no module serving_lab)\n"


def test_not_a_git_checkout_is_one_line_with_the_fix_and_no_upload(tmp_path, aws, dev):
    with pytest.raises(remote.SourceError) as err:
        remote.run(dev, aws, tmp_path, poll=0, sleep=lambda s: None)
    assert str(err.value) == (
        f"{tmp_path} is not a git checkout: run verify-remote from a git clone of the project "
        f"(it uploads only files git tracks, never local ones such as .env)"
    )
    assert "Contents" not in aws.client("s3").list_objects_v2(Bucket="pd-inference-dev-verify-123456789012-us-west-2")


@pytest.mark.parametrize("root", ["checkout", "not-a-checkout"])
def test_git_missing_exits_2_with_one_line(root, checkout, tmp_path, aws, monkeypatch, capsys):
    monkeypatch.setattr(remote, "PROJECT_ROOT", checkout if root == "checkout" else tmp_path)
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no git on PATH
    assert main(["verify-remote", "--stage", "dev"], session=aws) == 2
    err = capsys.readouterr().err
    assert err == (
        "verify-remote --stage dev: git is not installed (or not on PATH): install git; verify-remote "
        "uploads only the files git tracks, so it needs git to list them\n"
    )


def test_main_outside_a_checkout_exits_2(tmp_path, aws, monkeypatch, capsys):
    monkeypatch.setattr(remote, "PROJECT_ROOT", tmp_path)
    assert main(["verify-remote", "--stage", "dev"], session=aws) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith(
            f"verify-remote --stage dev: {tmp_path} is not a git checkout: run verify-remote from a git clone"
        )
        and "\n" not in err
    )


# --- the fix follows the cause --------------------------------------------------------------------


def test_no_credentials_says_log_in_not_deploy(local_aws, dev, capsys):
    session = boto3.session.Session(region_name="us-west-2")
    assert main(["verify-remote", "--stage", "dev"], session=session) == 1
    out = capsys.readouterr().out
    assert "verify runner  FAIL    no AWS credentials found" in out
    assert "-> log in (aws sso login, or set AWS_PROFILE / AWS_ACCESS_KEY_ID) and run again" in out
    assert "deploy the stage" not in out


def test_access_denied_names_the_permissions_not_a_deploy(aws, dev):
    s3 = aws.client("s3")
    stub = Stubber(s3)
    stub.add_client_error(
        "put_object", service_error_code="AccessDenied", service_message="Access Denied", http_status_code=403
    )
    stub.activate()
    report = remote.run(dev, aws, ROOT, poll=0, sleep=lambda s: None, clients={"s3": s3})
    (check,) = report.checks
    assert check.detail == "PutObject: AccessDenied: Access Denied"
    assert check.fix == (
        "the credentials may not use the runner: allow s3:PutObject on "
        "pd-inference-dev-verify-123456789012-us-west-2/source.zip, codebuild:StartBuild and "
        "codebuild:BatchGetBuilds on pd-inference-dev-verify"
    )


def test_missing_codebuild_project_says_to_deploy_the_stage(aws, dev):
    codebuild = aws.client("codebuild")
    stub = Stubber(codebuild)
    stub.add_client_error(
        "start_build", service_error_code="ResourceNotFoundException", service_message="Project cannot be found"
    )
    stub.activate()
    report = remote.run(dev, aws, ROOT, poll=0, sleep=lambda s: None, clients={"codebuild": codebuild})
    (check,) = report.checks
    assert check.fix.startswith("deploy the stage first: the runner (pd-inference-dev-verify")


def test_the_pipelines_source_without_git_is_uploaded_inside_codebuild(checkout, tmp_path, monkeypatch):
    """The pipeline's Verify step (stacks/pipeline.py) gets the repository as a zip without .git: inside
    CodeBuild that folder is accepted, hidden files and caches left out; anywhere else it is refused."""
    source = tmp_path / "codepipeline-source"
    subprocess.run(["cp", "-r", str(checkout), str(source)], check=True)
    subprocess.run(["rm", "-rf", str(source / ".git"), str(source / "ops" / "link.py")], check=True)
    (source / "ops" / "__pycache__").mkdir()
    (source / "ops" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    with pytest.raises(remote.SourceError):
        remote.package(source)
    monkeypatch.setenv("CODEBUILD_BUILD_ID", "pd-inference-pipeline:1")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # and without git at all
    names = _names(source)
    assert set(TRACKED) <= set(names)
    assert not [n for n in names if "/." in n or n.startswith(".") or "__pycache__" in n]
