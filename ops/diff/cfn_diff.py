"""`cdk diff --template`: the project's pinned CDK CLI's own diff of one synthesized stack against the base
template, with its noise left out and the serving chart's one-line manifest cut."""

from __future__ import annotations

from pathlib import Path

from .model import DiffError
from .processes import child
from .synth import env

ROOT = Path(__file__).resolve().parents[2]


def cdk() -> Path:
    """The pinned CDK CLI of this code's own checkout, never the compared tree's node_modules (that would be
    the tree's code judging itself)."""
    cli = ROOT / "node_modules" / ".bin" / "cdk"
    if not cli.exists():
        raise DiffError(f"the pinned CDK CLI is not installed in {ROOT}: run scripts/setup.sh there")
    return cli


def cfn_diff(sandbox: Path, head_out: Path, stack_path: str, base_template: Path) -> str:
    """Run in `sandbox`, not in the tree: the CLI reads cdk.json of its folder, whose `plugin` list it loads
    (aws-cdk-cli packages/aws-cdk/lib/cli/user-configuration.ts reads cdk.json and ~/.cdk.json)."""
    run = child(
        [
            str(cdk()),
            "diff",
            "--app",
            str(head_out),
            "--exclusively",
            "--template",
            str(base_template),
            stack_path,
        ],
        cwd=sandbox,
        env=env(head_out, None, sandbox),
        timeout=300,
    )
    text = (run.stdout + run.stderr).strip()
    keep = [
        shorten(line)
        for line in text.splitlines()
        if "feature flags are not configured" not in line and not line.startswith("✨")
    ]
    return "\n".join(keep).strip()


def shorten(line: str, limit: int = 1000) -> str:
    """A Kubernetes manifest is one JSON string in CloudFormation (the serving chart's: tens of KB): cut it, the
    Kubernetes diff shows its rendered YAML. Any other line stays whole: an IAM or security group table row, a
    property value, whose full text is nowhere else in the report."""
    if len(line) <= limit or '"apiVersion":' not in line:
        return line
    return f"{line[:240]}... ({len(line)} characters; see the Kubernetes diff for what changed)"
