"""`diff --base REF`: what a change does to every stage, offline, for pull-request review.

Synthesizes the base revision (in a temporary git worktree) and the working tree, both without
credentials, then per stage: `cdk diff --template` of each stack against the base template, a unified
diff of the rendered Kubernetes YAML and Helm values, and a summary per stack (added / changed /
removed / replaced). Replacing or deleting the cluster, a nodegroup, the VPC or the KMS key, and a
launch-template change that rolls a nodegroup's nodes, are listed first as dangers.

Replacement is decided from CloudFormation's own resource schemas (the `createOnlyProperties` that
cfn-lint ships): a change to one of those properties replaces the resource.
"""
from __future__ import annotations

import concurrent.futures
import difflib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
DANGEROUS_TYPES = {"AWS::EKS::Cluster": "cluster", "AWS::EKS::Nodegroup": "nodegroup", "AWS::EC2::VPC": "VPC",
                   "AWS::KMS::Key": "KMS key"}
K8S_FILES = ("inference.yaml", "serve-config.yaml", "helm-releases.yaml")


class DiffError(Exception):
    """One line: which step failed and why."""


@dataclass
class ResourceChange:
    logical_id: str
    type: str
    action: str  # added | removed | changed | replaced | nodes-replaced
    because: list[str] = field(default_factory=list)

    @property
    def dangerous(self) -> bool:
        if self.action == "nodes-replaced":
            return True
        return self.type in DANGEROUS_TYPES and self.action in ("replaced", "removed")

    def describe(self) -> str:
        what = DANGEROUS_TYPES.get(self.type, self.type)
        reason = f" ({', '.join(self.because)})" if self.because else ""
        if self.action == "nodes-replaced":
            return f"{what} {self.logical_id}: every node is replaced (rolling){reason}"
        return f"{what} {self.logical_id} {self.action}{reason}"


@dataclass
class StackDiff:
    stage: str
    path: str  # e.g. dev/Cluster
    changes: list[ResourceChange]
    cfn_diff: str = ""

    def count(self, action: str) -> int:
        return sum(change.action == action for change in self.changes)

    @property
    def summary(self) -> str:
        replaced = self.count("replaced") + self.count("nodes-replaced")
        return (f"{self.count('added')} added, {self.count('changed')} changed, {self.count('removed')} removed, "
                f"{replaced} replaced")


@dataclass
class StageDiff:
    stage: str
    stacks: list[StackDiff]
    k8s: dict[str, str]


@dataclass
class DiffResult:
    base: str
    stages: list[StageDiff]

    @property
    def dangers(self) -> list[tuple[str, ResourceChange]]:
        return [(stack.path, change) for stage in self.stages for stack in stage.stacks
                for change in stack.changes if change.dangerous]


# --- replacement analysis ------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _create_only(resource_type: str) -> tuple[str, ...]:
    import cfnlint
    schemas = Path(cfnlint.__file__).parent / "data" / "schemas"
    providers = json.loads((schemas / "providers" / "us-east-1.json").read_text())
    digest = providers.get(resource_type)
    if digest is None:
        return ()
    schema = json.loads((schemas / "resources" / f"{digest}.json").read_text())
    return tuple(p.removeprefix("/properties/") for p in schema.get("createOnlyProperties", []))


def _pointer(properties: dict, path: str) -> Any:
    current: Any = properties
    for part in path.split("/"):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def resource_changes(old: dict, new: dict) -> list[ResourceChange]:
    old_res, new_res = old.get("Resources", {}), new.get("Resources", {})
    changes = []
    for logical_id in sorted(set(old_res) | set(new_res)):
        before, after = old_res.get(logical_id), new_res.get(logical_id)
        if before is None:
            changes.append(ResourceChange(logical_id, after["Type"], "added"))
        elif after is None:
            changes.append(ResourceChange(logical_id, before["Type"], "removed"))
        elif before != after:
            if before["Type"] != after["Type"]:
                changes.append(ResourceChange(logical_id, after["Type"], "replaced", ["Type"]))
                continue
            props_before, props_after = before.get("Properties", {}), after.get("Properties", {})
            because = [p for p in _create_only(after["Type"])
                       if _pointer(props_before, p) != _pointer(props_after, p)]
            changes.append(ResourceChange(logical_id, after["Type"], "replaced" if because else "changed",
                                          because))
    # A launch template change rolls every node of the nodegroups that use it (a new template version).
    for change in list(changes):
        if change.type == "AWS::EC2::LaunchTemplate" and change.action == "changed":
            for logical_id, res in new_res.items():
                if res["Type"] == "AWS::EKS::Nodegroup" and \
                        res.get("Properties", {}).get("LaunchTemplate", {}).get("Id") == {"Ref": change.logical_id}:
                    if not any(c.logical_id == logical_id and c.action == "replaced" for c in changes):
                        changes.append(ResourceChange(logical_id, res["Type"], "nodes-replaced",
                                                      [f"launch template {change.logical_id}"]))
    return changes


# --- synth -------------------------------------------------------------------------------------------

def _env(outdir: Path, stage: Optional[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(CDK_OUTDIR=str(outdir), AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null",
               AWS_SHARED_CREDENTIALS_FILE="/dev/null", JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
               CDK_DISABLE_CLI_TELEMETRY="true")
    if stage:
        env["CDK_CONTEXT_JSON"] = json.dumps({"stage": stage})
    return env


def _synth(tree: Path, outdir: Path, stage: Optional[str], label: str) -> None:
    run = subprocess.run([sys.executable, "app.py"], cwd=tree, env=_env(outdir, stage), capture_output=True,
                         text=True, timeout=600)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise DiffError(f"synth of the {label} failed: {last}")


def repo_root(start: Path) -> Path:
    """The git checkout the command runs in (its working tree is the `head` side)."""
    found = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=start, capture_output=True, text=True)
    if found.returncode != 0:
        raise DiffError(f"{start} is not inside a git checkout")
    return Path(found.stdout.strip())


def _worktree(repo: Path, ref: str, where: Path) -> str:
    resolved = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo,
                              capture_output=True, text=True)
    if resolved.returncode != 0:
        raise DiffError(f"{ref!r} is not a commit in this repository")
    commit = resolved.stdout.strip()
    added = subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(where), commit], cwd=repo,
                           capture_output=True, text=True)
    if added.returncode != 0:
        raise DiffError(f"git worktree add failed: {added.stderr.strip()}")
    return commit


def _assemblies(outdir: Path) -> dict[str, dict[str, Path]]:
    """{stage: {stack display path: template file}} of a cloud assembly."""
    found: dict[str, dict[str, Path]] = {}
    for stage_dir in sorted(outdir.glob("assembly-*")):
        stage = stage_dir.name.removeprefix("assembly-")
        manifest = json.loads((stage_dir / "manifest.json").read_text())
        for artifact in manifest["artifacts"].values():
            if artifact["type"] == "aws:cloudformation:stack":
                path = artifact.get("displayName", "")
                found.setdefault(stage, {})[path] = stage_dir / artifact["properties"]["templateFile"]
    return found


def _cdk(repo: Path) -> Path:
    """The project's pinned CDK CLI (node_modules of the checkout, else of this code's own checkout)."""
    for root in (repo, ROOT):
        cli = root / "node_modules" / ".bin" / "cdk"
        if cli.exists():
            return cli
    raise DiffError("the pinned CDK CLI is not installed: run scripts/setup.sh")


def _cfn_diff(repo: Path, head_out: Path, stack_path: str, base_template: Path) -> str:
    run = subprocess.run([str(_cdk(repo)), "diff", "--app", str(head_out), "--exclusively", "--template",
                          str(base_template), stack_path], cwd=repo, env=_env(head_out, None),
                         capture_output=True, text=True, timeout=300)
    text = (run.stdout + run.stderr).strip()
    keep = [_shorten(line) for line in text.splitlines()
            if "feature flags are not configured" not in line and not line.startswith("✨")]
    return "\n".join(keep).strip()


def _shorten(line: str, limit: int = 240) -> str:
    """A manifest is one JSON string in CloudFormation: cut it; the readable YAML diff follows."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... ({len(line)} characters; see the Kubernetes diff for what changed)"


def _k8s(base_out: Path, head_out: Path, stage: str) -> dict[str, str]:
    diffs = {}
    for name in K8S_FILES:
        old, new = base_out / "k8s" / stage / name, head_out / "k8s" / stage / name
        old_lines = old.read_text().splitlines(keepends=True) if old.exists() else []
        new_lines = new.read_text().splitlines(keepends=True) if new.exists() else []
        text = "".join(difflib.unified_diff(old_lines, new_lines, f"base/k8s/{stage}/{name}",
                                            f"head/k8s/{stage}/{name}"))
        if text:
            diffs[name] = text
    return diffs


def compute(base: str, *, stage: Optional[str] = None, start: Optional[Path] = None,
            cfn: bool = True) -> DiffResult:
    """Diff the working tree of the checkout around `start` (default: the current folder) against `base`."""
    tree = repo_root(start or Path.cwd())
    _cdk(tree)
    work = Path(tempfile.mkdtemp(prefix="pd-diff-"))
    base_tree, base_out, head_out = work / "base", work / "base.out", work / "head.out"
    try:
        commit = _worktree(tree, base, base_tree)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [pool.submit(_synth, base_tree, base_out, stage, f"base {base}"),
                    pool.submit(_synth, tree, head_out, stage, "working tree")]
            for job in jobs:
                job.result()
        old, new = _assemblies(base_out), _assemblies(head_out)
        empty = work / "empty.template.json"
        empty.write_text("{}")
        stages, cfn_jobs = [], {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for stage_name in sorted(set(old) | set(new)):
                stacks = []
                for path in sorted(set(old.get(stage_name, {})) | set(new.get(stage_name, {}))):
                    before_file = old.get(stage_name, {}).get(path)
                    after_file = new.get(stage_name, {}).get(path)
                    before = json.loads(before_file.read_text()) if before_file else {}
                    after = json.loads(after_file.read_text()) if after_file else {}
                    stack = StackDiff(stage_name, path, resource_changes(before, after))
                    if cfn and after_file and stack.changes:
                        cfn_jobs[path] = (stack, pool.submit(_cfn_diff, tree, head_out, path, before_file or empty))
                    elif not after_file:
                        stack.cfn_diff = f"stack {path} is removed"
                    stacks.append(stack)
                stages.append(StageDiff(stage_name, stacks, _k8s(base_out, head_out, stage_name)))
            for stack, job in cfn_jobs.values():
                stack.cfn_diff = job.result()
        return DiffResult(base=f"{base} ({commit[:10]})", stages=stages)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=tree, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


# --- output ------------------------------------------------------------------------------------------

def text(result: DiffResult) -> str:
    lines = [f"Offline diff: {result.base} -> working tree"]
    dangers = result.dangers
    if dangers:
        lines.append(f"DANGER: {len(dangers)} destructive change(s)")
        lines += [f"  ! {path}: {change.describe()}" for path, change in dangers]
    else:
        lines.append("No replacement or deletion of the cluster, a nodegroup, the VPC or the KMS key.")
    for stage in result.stages:
        lines.append(f"\nstage {stage.stage}")
        for stack in stage.stacks:
            lines.append(f"  {stack.path:<16} {stack.summary if stack.changes else 'no changes'}")
        for stack in stage.stacks:
            if stack.cfn_diff:
                lines += ["", f"--- CloudFormation: {stack.path}", stack.cfn_diff]
        for name, diff in stage.k8s.items():
            lines += ["", f"--- Kubernetes: {stage.stage}/{name}", diff.rstrip("\n")]
    return "\n".join(lines) + "\n"


def markdown(result: DiffResult) -> str:
    out = [f"## Infrastructure diff against `{result.base}`", ""]
    dangers = result.dangers
    if dangers:
        out += ["> [!CAUTION]", f"> **{len(dangers)} destructive change(s)**", ">"]
        out += [f"> - `{path}`: {change.describe()}" for path, change in dangers]
        out.append("")
    else:
        out += ["No replacement or deletion of the cluster, a nodegroup, the VPC or the KMS key.", ""]
    out += ["| stage | stack | added | changed | removed | replaced |", "|---|---|---|---|---|---|"]
    for stage in result.stages:
        for stack in stage.stacks:
            replaced = stack.count("replaced") + stack.count("nodes-replaced")
            out.append(f"| {stage.stage} | `{stack.path}` | {stack.count('added')} | {stack.count('changed')} | "
                       f"{stack.count('removed')} | {replaced} |")
    for stage in result.stages:
        details = [s for s in stage.stacks if s.cfn_diff]
        if not details and not stage.k8s:
            continue
        out += ["", f"### {stage.stage}"]
        for stack in details:
            out += ["", f"<details><summary>CloudFormation: <code>{stack.path}</code> ({stack.summary})</summary>",
                    "", "```", stack.cfn_diff, "```", "", "</details>"]
        for name, diff in stage.k8s.items():
            out += ["", f"<details open><summary>Kubernetes: <code>{stage.stage}/{name}</code></summary>", "",
                    "```diff", diff.rstrip("\n"), "```", "", "</details>"]
    return "\n".join(out) + "\n"
