"""Synth of one side (the base worktree or the working tree) without credentials, and what it wrote: the
cloud assembly of every stage (its stacks' templates) and the stage names of a tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .model import DiffError
from .processes import child

SYNTH_TIMEOUT = 600


def env(outdir: Path, stage: str | None) -> dict[str, str]:
    """The environment of a synth (and of `cdk diff`): no AWS or CDK settings of the caller, no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        CDK_OUTDIR=str(outdir),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CDK_DISABLE_CLI_TELEMETRY="true",
    )
    if stage:
        env["CDK_CONTEXT_JSON"] = json.dumps({"stage": stage})
    return env


def synth(tree: Path, outdir: Path, stage: str | None, label: str) -> None:
    try:
        run = child([sys.executable, "app.py"], cwd=tree, env=env(outdir, stage), timeout=SYNTH_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise DiffError(
            f"synth of the {label} did not finish within {SYNTH_TIMEOUT} s: run `python app.py` "
            f"there to see where it hangs"
        ) from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise DiffError(f"synth of the {label} failed: {last}")


def stage_names(tree: Path) -> list[str]:
    from config.loader import stage_files

    return [path.stem for path in stage_files(tree / "config")]


def assemblies(outdir: Path) -> dict[str, dict[str, Path]]:
    """{stage: {stack display path: template file}} of a cloud assembly (none when it was not synthesized)."""
    found: dict[str, dict[str, Path]] = {}
    if not outdir.is_dir():
        return found
    for stage_dir in sorted(outdir.glob("assembly-*")):
        stage = stage_dir.name.removeprefix("assembly-")
        manifest = json.loads((stage_dir / "manifest.json").read_text())
        for artifact in manifest["artifacts"].values():
            if artifact["type"] == "aws:cloudformation:stack":
                path = artifact.get("displayName", "")
                found.setdefault(stage, {})[path] = stage_dir / artifact["properties"]["templateFile"]
    return found
