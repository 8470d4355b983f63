"""`verify-remote`: run `ops verify` inside the stage's VPC, on its verify runner (a CodeBuild project,
stacks/verify_runner.py). Uploads the runner's source (the files git tracks under RUNNER_PATHS: never
.env, credentials, keys or any untracked or ignored file) to the runner's bucket, starts a build, waits
for it and reports its outcome. What the pipeline runs after each stage; also the way to verify a
private-only cluster without a bastion."""

from __future__ import annotations

import io
import os
import subprocess
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import boto3

from clients.report import Report
from config.schema import StageConfig
from config.topology import (
    VERIFY_CONSTRAINTS,
    VERIFY_LOCK,
    VERIFY_REQUIREMENTS,
    VERIFY_SOURCE_KEY,
    verify_runner_name,
    verify_source_bucket,
)

from .errors import AWS_ERRORS, aws_fix, describe, error_code

# What the runner's buildspec uses (config/topology.py VERIFY_INSTALL_COMMANDS: `pip install --require-hashes
# -r requirements-ops.lock`, then `python -m ops verify`) and what that imports: the
# ops, clients, config and charts packages (tests/ops/test_remote.py runs `python -m ops verify` from an unpacked
# upload to prove it).
RUNNER_PATHS = ("clients", "config", "ops", "charts", VERIFY_REQUIREMENTS, VERIFY_CONSTRAINTS, VERIFY_LOCK)
REQUIRED = ("ops/__main__.py", "config/__init__.py", VERIFY_REQUIREMENTS, VERIFY_CONSTRAINTS, VERIFY_LOCK)
SOURCE_KEY = VERIFY_SOURCE_KEY
PROJECT_ROOT = Path(__file__).resolve().parent.parent


class SourceError(Exception):
    """The source to upload cannot be listed (no git, not a checkout); one line with the fix (exit 2)."""


def _git(root: Path, *args: str) -> str:
    try:
        run = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=120, check=False)
    except FileNotFoundError:
        raise SourceError(
            "git is not installed (or not on PATH): install git; verify-remote uploads only the "
            "files git tracks, so it needs git to list them"
        ) from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise SourceError(f"cannot run git in {root}: {exc}") from None
    if run.returncode != 0:
        if "not a git repository" in run.stderr:
            raise SourceError(
                f"{root} is not a git checkout: run verify-remote from a git clone of the project "
                f"(it uploads only files git tracks, never local ones such as .env)"
            )
        last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
        raise SourceError(f"git {args[0]} failed in {root}: {last}")
    return run.stdout


def _pipeline_source(root: Path) -> list[str]:
    """The runner's paths in a CodePipeline source artifact (a zip of the repository without .git, as
    the pipeline's Verify step gets it: stacks/pipeline.py): no developer's files can be in it, but no git
    to ask either. Hidden files, caches and links are left out all the same."""
    found = []
    for entry in RUNNER_PATHS:
        path = root / entry
        if path.is_file() and not path.is_symlink():
            found.append(entry)
        elif path.is_dir() and not path.is_symlink():
            for file in sorted(path.rglob("*")):
                parts = file.relative_to(root).parts
                if (
                    file.is_file()
                    and not file.is_symlink()
                    and file.suffix != ".pyc"
                    and not any(part.startswith(".") or part == "__pycache__" for part in parts)
                ):
                    found.append(file.relative_to(root).as_posix())
    return found


def source_files(root: Path) -> list[str]:
    """The runner's paths that git tracks, relative to `root`, present in the working tree as plain files.
    Untracked and ignored files (.env, credentials, keys, virtual environments, synth output) are never
    listed, wherever they are. Only inside a CodeBuild build (the pipeline's Verify step, whose source has
    no .git) is a folder that is not a git checkout accepted."""
    root = Path(root)
    try:
        _git(root, "rev-parse", "--show-toplevel")
    except SourceError:
        if not os.environ.get("CODEBUILD_BUILD_ID") or (root / ".git").exists():
            raise
        listed = _pipeline_source(root)
    else:
        listed = _git(root, "ls-files", "-z", "--cached", "--", *RUNNER_PATHS).split("\0")
    files = sorted({name for name in listed if name and (root / name).is_file() and not (root / name).is_symlink()})
    missing = [name for name in REQUIRED if name not in files]
    if missing:
        raise SourceError(
            f"{', '.join(missing)} not tracked by git in {root}: run verify-remote from a clone of the "
            f"project (git ls-files must list them)"
        )
    return files


def package(root: Path) -> bytes:
    """The runner's source as a zip, in a stable order: only what git tracks under RUNNER_PATHS, with its
    working-tree content (local edits to tracked files are what gets verified)."""
    root = Path(root)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in source_files(root):
            archive.write(root / name, name)
    return buffer.getvalue()


def _start_fix(exc: BaseException, cfg: StageConfig, name: str, bucket: str) -> str:
    """The fix for a failed upload or start, by cause: only a missing bucket or project means the
    runner is not deployed."""
    code = error_code(exc)
    if code in ("NoSuchBucket", "ResourceNotFoundException"):
        return f"deploy the stage first: the runner ({name}, bucket {bucket}) is part of {cfg.stage}/Cluster"
    if code in ("AccessDenied", "AccessDeniedException"):
        return (
            f"the credentials may not use the runner: allow s3:PutObject on {bucket}/{SOURCE_KEY}, "
            f"codebuild:StartBuild and codebuild:BatchGetBuilds on {name}"
        )
    return aws_fix(exc, "run again; if it persists, check the runner in the CodeBuild console")


def run(
    cfg: StageConfig,
    session: boto3.session.Session,
    root: Path,
    *,
    poll: float = 20,
    timeout: float = 3600,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    clients: dict | None = None,
) -> Report:
    clients = clients or {}

    def client(name: str):
        return clients.get(name) or session.client(name, region_name=cfg.region)

    report = Report("verify-remote", cfg.stage)
    name = verify_runner_name(cfg.stage)
    source = package(root)  # before any AWS call: no git, no upload (SourceError, exit 2)
    bucket = verify_source_bucket(cfg.stage, "ACCOUNT", cfg.region)
    try:
        account = client("sts").get_caller_identity()["Account"]
        bucket = verify_source_bucket(cfg.stage, account, cfg.region)
        client("s3").put_object(Bucket=bucket, Key=SOURCE_KEY, Body=source)
        build = client("codebuild").start_build(projectName=name)["build"]
    except AWS_ERRORS as exc:
        report.add("verify runner", "fail", describe(exc), _start_fix(exc, cfg, name, bucket))
        return report
    build_id, start = build["id"], clock()
    status = build.get("buildStatus", "IN_PROGRESS")
    try:
        while status == "IN_PROGRESS" and clock() - start < timeout:
            sleep(poll)
            build = client("codebuild").batch_get_builds(ids=[build_id])["builds"][0]
            status = build["buildStatus"]
    except AWS_ERRORS as exc:
        report.add(
            "verify runner",
            "fail",
            f"{build_id}: {describe(exc)}",
            aws_fix(exc, f"the build may still run: see it in the CodeBuild console ({build_id})"),
        )
        return report
    logs = build.get("logs", {}).get("deepLink", "")
    if status == "SUCCEEDED":
        report.add("verify runner", "pass", f"{build_id} SUCCEEDED: every verify check passed in the VPC", logs=logs)
    else:
        report.add(
            "verify runner",
            "fail",
            f"{build_id} {status}" + (": still running at the time limit" if status == "IN_PROGRESS" else ""),
            f"read the build's log for the verify table{': ' + logs if logs else ''}",
            logs=logs,
        )
    return report
