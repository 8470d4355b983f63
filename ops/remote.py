"""`verify-remote`: run `ops verify` inside the stage's VPC, on its verify runner (a CodeBuild project,
stacks/verify_runner.py). Uploads this checkout's source to the runner's bucket, starts a build, waits
for it and reports its outcome. What the pipeline runs after each stage; also the way to verify a
private-only cluster without a bastion."""
from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path
from typing import Callable

import boto3

from config.schema import StageConfig
from config.topology import verify_runner_name

from .errors import AWS_ERRORS, describe
from .report import Report

SKIP = {".git", ".venv", "node_modules", "cdk.out", "__pycache__", ".pytest_cache", ".hypothesis", "tests",
        "docs", "bench-results"}
SOURCE_KEY = "source.zip"


def _skipped(name: str) -> bool:
    return name in SKIP or name.startswith((".venv", "cdk.out"))


def package(root: Path) -> bytes:
    """The checkout as a zip (what the runner needs to run `python -m ops`), in a stable order. Local
    folders (every virtual environment, node_modules, synth output, tests, docs) are pruned, not walked."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not _skipped(d)]  # pruned in place: never descended into
        found += [Path(folder) / name for name in files]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(found, key=lambda p: p.relative_to(root).as_posix()):
            if path.is_file():
                archive.write(path, path.relative_to(root).as_posix())
    return buffer.getvalue()


def run(cfg: StageConfig, session: boto3.session.Session, root: Path, *, poll: float = 20, timeout: float = 3600,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
        clients: dict | None = None) -> Report:
    clients = clients or {}

    def client(name: str):
        return clients.get(name) or session.client(name, region_name=cfg.region)

    report = Report("verify-remote", cfg.stage)
    name = verify_runner_name(cfg.stage)
    try:
        account = client("sts").get_caller_identity()["Account"]
        bucket = f"{name}-{account}-{cfg.region}"
        client("s3").put_object(Bucket=bucket, Key=SOURCE_KEY, Body=package(root))
        build = client("codebuild").start_build(projectName=name)["build"]
    except AWS_ERRORS as exc:
        report.add("verify runner", "fail", describe(exc),
                   f"deploy the stage first: the runner ({name}) is part of {cfg.stage}/Cluster")
        return report
    build_id, start = build["id"], clock()
    status = build.get("buildStatus", "IN_PROGRESS")
    try:
        while status == "IN_PROGRESS" and clock() - start < timeout:
            sleep(poll)
            build = client("codebuild").batch_get_builds(ids=[build_id])["builds"][0]
            status = build["buildStatus"]
    except AWS_ERRORS as exc:
        report.add("verify runner", "fail", f"{build_id}: {describe(exc)}")
        return report
    logs = build.get("logs", {}).get("deepLink", "")
    if status == "SUCCEEDED":
        report.add("verify runner", "pass", f"{build_id} SUCCEEDED: every verify check passed in the VPC",
                   logs=logs)
    else:
        report.add("verify runner", "fail", f"{build_id} {status}" + (": still running at the time limit"
                                                                     if status == "IN_PROGRESS" else ""),
                   f"read the build's log for the verify table{': ' + logs if logs else ''}", logs=logs)
    return report
