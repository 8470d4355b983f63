"""The synthesized pipeline's CodeBuild projects, and their buildspecs run here as CodeBuild runs them.

CodeBuild runs a buildspec's phases in order (install, pre_build, build, post_build), each command in the
same shell, in the source folder (CODEBUILD_SRC_DIR), and stops at the first command that fails (buildspec
reference, "phases"). `runtime-versions` selects a runtime of the build image: here the machine's own Python,
Node.js and Go run, and the tests check the selection against the project's pins instead. The environment
holds what CodeBuild sets (the CODEBUILD_* variables, AWS_REGION, HOME) and no AWS credentials."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PHASES = ("install", "pre_build", "build", "post_build")
REF = "<ref>"  # what a CloudFormation reference inside a buildspec (Fn::Join) stands in as


def _joined(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_joined(part) for part in parts)
    return REF


def buildspecs(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every CodeBuild project's buildspec by logical ID (references replaced by REF)."""
    found = {}
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::CodeBuild::Project":
            found[name] = json.loads(_joined(resource["Properties"]["Source"]["BuildSpec"]))
    return found


def environments(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: resource["Properties"]["Environment"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::CodeBuild::Project"
    }


def commands(spec: dict[str, Any]) -> list[str]:
    return [command for phase in PHASES for command in (spec["phases"].get(phase) or {}).get("commands") or []]


def codebuild_environment(source: Path, home: Path, region: str = "us-west-2") -> dict[str, str]:
    """What CodeBuild sets in a build (environment-variables reference), and nothing of this machine's AWS set-up."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "CODEBUILD_CI": "true",
        "CODEBUILD_SRC_DIR": str(source),
        "CODEBUILD_BUILD_ID": "pd-inference-synth:local",
        "CODEBUILD_BUILD_NUMBER": "1",
        "CODEBUILD_INITIATOR": "codepipeline/pd-inference",
        "CODEBUILD_RESOLVED_SOURCE_VERSION": commit.stdout.strip(),
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        # the test command's machine-wide mypy cache (scripts/test.sh): a cache, not a setting; CodeBuild runs cold
        **({"MYPY_CACHE_DIR": os.environ["MYPY_CACHE_DIR"]} if "MYPY_CACHE_DIR" in os.environ else {}),
    }


@dataclass
class BuildRun:
    returncode: int
    seconds: dict[str, float]  # by phase
    peak_rss: int  # bytes: the most the build's process tree held at once (sampled every 0.5 s)
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack += children.get(current, [])
    return total


MARK = "::codebuild-local-phase"


def script(spec: dict[str, Any]) -> str:
    """One bash session for the whole build, as CodeBuild runs buildspec 0.2 (variables persist across commands
    and phases); the first failing command ends it."""
    lines = ["set -e"]
    for phase in PHASES:
        phase_commands = (spec["phases"].get(phase) or {}).get("commands") or []
        if phase_commands:
            lines.append(f'echo "{MARK} {phase} $(date +%s.%N)"')
            lines += phase_commands
    lines.append(f'echo "{MARK} end $(date +%s.%N)"')
    return "\n".join(lines) + "\n"


def _phase_seconds(output: str) -> dict[str, float]:
    marks = [line.split()[1:3] for line in output.splitlines() if line.startswith(MARK)]
    return {name: float(end) - float(start) for (name, start), (_, end) in itertools.pairwise(marks)}


def run_buildspec(spec: dict[str, Any], *, cwd: Path, env: dict[str, str], timeout: float = 3600) -> BuildRun:
    started, peak = time.monotonic(), 0
    with tempfile.TemporaryFile("w+") as log:
        with subprocess.Popen(
            ["bash", "-c", script(spec)], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT
        ) as child:
            while child.poll() is None:
                peak = max(peak, _tree_rss(child.pid))
                if time.monotonic() - started > timeout:
                    child.kill()
                time.sleep(0.5)
        log.seek(0)
        output = log.read()
    return BuildRun(child.returncode, _phase_seconds(output), peak, output)
