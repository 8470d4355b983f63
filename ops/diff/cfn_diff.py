"""`cdk diff --template`: the project's pinned CDK CLI's own diff of one synthesized stack against the base
template, with its noise left out and CloudFormation's one-line manifests cut."""

from __future__ import annotations

from pathlib import Path

from .model import DiffError
from .processes import child
from .synth import env

ROOT = Path(__file__).resolve().parents[2]


def cdk(repo: Path) -> Path:
    """The project's pinned CDK CLI (node_modules of the checkout, else of this code's own checkout)."""
    for root in (repo, ROOT):
        cli = root / "node_modules" / ".bin" / "cdk"
        if cli.exists():
            return cli
    raise DiffError("the pinned CDK CLI is not installed: run scripts/setup.sh")


def cfn_diff(repo: Path, head_out: Path, stack_path: str, base_template: Path) -> str:
    run = child(
        [
            str(cdk(repo)),
            "diff",
            "--app",
            str(head_out),
            "--exclusively",
            "--template",
            str(base_template),
            stack_path,
        ],
        cwd=repo,
        env=env(head_out, None),
        timeout=300,
    )
    text = (run.stdout + run.stderr).strip()
    keep = [
        shorten(line)
        for line in text.splitlines()
        if "feature flags are not configured" not in line and not line.startswith("✨")
    ]
    return "\n".join(keep).strip()


def shorten(line: str, limit: int = 240) -> str:
    """A manifest is one JSON string in CloudFormation: cut it; the readable YAML diff follows."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... ({len(line)} characters; see the Kubernetes diff for what changed)"
