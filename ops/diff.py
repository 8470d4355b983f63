"""`diff --base REF`: what a change does to every stage, offline, for pull-request review.

Synthesizes the base revision (in a temporary git worktree) and the working tree, both without
credentials, then per stage: `cdk diff --template` of each stack against the base template, a unified
diff of the rendered Kubernetes YAML and Helm values, and a summary per stack (added / changed /
removed / replaced). Replacing or deleting the cluster, a nodegroup, the VPC or the KMS key, and a
launch-template change that rolls a nodegroup's nodes, are listed first as dangers.

Replacement is decided from CloudFormation's own resource schemas (the `createOnlyProperties` that
cfn-lint ships): a change to one of those properties replaces the resource.

Two notes per stage come from the rendered Kubernetes YAML: a change to the RayService's
`rayClusterConfig` (the Ray pods) under `upgradeStrategy: None`, which KubeRay does not roll out (the
manual step is printed), and GPUs that the replica counts leave idle. A stage that exists only in the
working tree (or only in the base) is reported as new (or removed): every resource added (or removed).
"""

from __future__ import annotations

import concurrent.futures
import difflib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.topology import INFERENCE_FILE, RENDERED_DIR, RENDERED_FILES

ROOT = Path(__file__).resolve().parent.parent
DANGEROUS_TYPES = {
    "AWS::EKS::Cluster": "cluster",
    "AWS::EKS::Nodegroup": "nodegroup",
    "AWS::EC2::VPC": "VPC",
    "AWS::KMS::Key": "KMS key",
}
K8S_FILES = RENDERED_FILES


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
        return (
            f"{self.count('added')} added, {self.count('changed')} changed, {self.count('removed')} removed, "
            f"{replaced} replaced"
        )


@dataclass
class StageDiff:
    stage: str
    stacks: list[StackDiff]
    k8s: dict[str, str]
    status: str = ""  # "new" (only in the working tree), "removed" (only in the base), "" (in both)
    manual: list[str] = field(default_factory=list)  # steps a deploy does not do (KubeRay under None)
    idle_gpus: str = ""  # how many GPUs the replica counts leave idle, when some are

    @property
    def title(self) -> str:
        if self.status == "new":
            return f"stage {self.stage} (new: not in the base, every resource is added)"
        if self.status == "removed":
            return f"stage {self.stage} (removed: only in the base, every resource is removed)"
        return f"stage {self.stage}"


@dataclass
class DiffResult:
    base: str
    stages: list[StageDiff]

    @property
    def dangers(self) -> list[tuple[str, ResourceChange]]:
        return [
            (stack.path, change)
            for stage in self.stages
            for stack in stage.stacks
            for change in stack.changes
            if change.dangerous
        ]

    @property
    def manual_steps(self) -> list[tuple[str, str]]:
        return [(stage.stage, step) for stage in self.stages for step in stage.manual]

    @property
    def idle(self) -> list[tuple[str, str]]:
        return [(stage.stage, stage.idle_gpus) for stage in self.stages if stage.idle_gpus]


# --- replacement analysis ------------------------------------------------------------------------


@functools.cache
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
            because = [p for p in _create_only(after["Type"]) if _pointer(props_before, p) != _pointer(props_after, p)]
            changes.append(ResourceChange(logical_id, after["Type"], "replaced" if because else "changed", because))
    # A launch template change rolls every node of the nodegroups that use it (a new template version).
    for change in list(changes):
        if change.type == "AWS::EC2::LaunchTemplate" and change.action == "changed":
            for logical_id, res in new_res.items():
                if res["Type"] == "AWS::EKS::Nodegroup" and res.get("Properties", {}).get("LaunchTemplate", {}).get(
                    "Id"
                ) == {"Ref": change.logical_id}:
                    if not any(c.logical_id == logical_id and c.action == "replaced" for c in changes):
                        changes.append(
                            ResourceChange(
                                logical_id, res["Type"], "nodes-replaced", [f"launch template {change.logical_id}"]
                            )
                        )
    return changes


# --- synth -------------------------------------------------------------------------------------------


def _env(outdir: Path, stage: str | None) -> dict[str, str]:
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


SYNTH_TIMEOUT = 600

# The child processes running now (synths, git, cdk diff), so that SIGTERM can end them before the temporary
# folder they write into is removed (their threads then return at once).
_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()


def _child(argv: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...), with the child registered; none is
    started once SIGTERM has arrived (queued jobs of a thread pool would otherwise still start theirs)."""
    if _stopping.is_set():
        raise DiffError("stopped")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options) as process:
        with _children_lock:
            _children.add(process)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        finally:
            with _children_lock:
                _children.discard(process)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _end_children() -> None:
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for process in running:
        try:
            process.kill()
        except OSError:
            pass


def _synth(tree: Path, outdir: Path, stage: str | None, label: str) -> None:
    try:
        run = _child([sys.executable, "app.py"], cwd=tree, env=_env(outdir, stage), timeout=SYNTH_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise DiffError(
            f"synth of the {label} did not finish within {SYNTH_TIMEOUT} s: run `python app.py` "
            f"there to see where it hangs"
        ) from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise DiffError(f"synth of the {label} failed: {last}")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return _child(["git", *args], cwd=cwd, timeout=300)
    except FileNotFoundError:
        raise DiffError(
            "git is not installed (or not on PATH): install git; diff builds the base revision in a git worktree"
        ) from None
    except subprocess.TimeoutExpired:
        raise DiffError(f"git {args[0]} did not finish within 300 s in {cwd}") from None


def repo_root(start: Path) -> Path:
    """The git checkout the command runs in (its working tree is the `head` side)."""
    found = _git(start, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise DiffError(f"{start} is not inside a git checkout: run diff in a clone of the project")
    return Path(found.stdout.strip())


def _worktree(repo: Path, ref: str, where: Path) -> str:
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if resolved.returncode != 0:
        raise DiffError(f"{ref!r} is not a commit in this repository")
    commit = resolved.stdout.strip()
    added = _git(repo, "worktree", "add", "--detach", "--quiet", str(where), commit)
    if added.returncode != 0:
        raise DiffError(f"git worktree add failed: {added.stderr.strip()}")
    return commit


def _stage_names(tree: Path) -> list[str]:
    from config.loader import stage_files

    return [path.stem for path in stage_files(tree / "config")]


def _assemblies(outdir: Path) -> dict[str, dict[str, Path]]:
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


def _cdk(repo: Path) -> Path:
    """The project's pinned CDK CLI (node_modules of the checkout, else of this code's own checkout)."""
    for root in (repo, ROOT):
        cli = root / "node_modules" / ".bin" / "cdk"
        if cli.exists():
            return cli
    raise DiffError("the pinned CDK CLI is not installed: run scripts/setup.sh")


def _cfn_diff(repo: Path, head_out: Path, stack_path: str, base_template: Path) -> str:
    run = _child(
        [
            str(_cdk(repo)),
            "diff",
            "--app",
            str(head_out),
            "--exclusively",
            "--template",
            str(base_template),
            stack_path,
        ],
        cwd=repo,
        env=_env(head_out, None),
        timeout=300,
    )
    text = (run.stdout + run.stderr).strip()
    keep = [
        _shorten(line)
        for line in text.splitlines()
        if "feature flags are not configured" not in line and not line.startswith("✨")
    ]
    return "\n".join(keep).strip()


def _shorten(line: str, limit: int = 240) -> str:
    """A manifest is one JSON string in CloudFormation: cut it; the readable YAML diff follows."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}... ({len(line)} characters; see the Kubernetes diff for what changed)"


def _k8s(base_out: Path, head_out: Path, stage: str) -> dict[str, str]:
    diffs = {}
    for name in K8S_FILES:
        old, new = base_out / RENDERED_DIR / stage / name, head_out / RENDERED_DIR / stage / name
        old_lines = old.read_text().splitlines(keepends=True) if old.exists() else []
        new_lines = new.read_text().splitlines(keepends=True) if new.exists() else []
        text = "".join(
            difflib.unified_diff(old_lines, new_lines, f"base/k8s/{stage}/{name}", f"head/k8s/{stage}/{name}")
        )
        if text:
            diffs[name] = text
    return diffs


def compute(base: str, *, stage: str | None = None, start: Path | None = None, cfn: bool = True) -> DiffResult:
    """Diff the working tree of the checkout around `start` (default: the current folder) against `base`."""
    tree = repo_root(start or Path.cwd())
    _cdk(tree)
    work = Path(tempfile.mkdtemp(prefix="pd-diff-"))
    base_tree, base_out, head_out = work / "base", work / "base.out", work / "head.out"
    try:
        commit = _worktree(tree, base, base_tree)
        sides = [(base_tree, base_out, f"base {base}"), (tree, head_out, "working tree")]
        if stage:
            # A stage of only one side (added or removed by the change) is synthesized on that side alone:
            # the other has nothing, so every resource is added (or removed).
            in_base, in_head = stage in _stage_names(base_tree), stage in _stage_names(tree)
            if not in_base and not in_head:
                names = ", ".join(sorted(set(_stage_names(base_tree)) | set(_stage_names(tree)))) or "none"
                raise DiffError(f"no stage named {stage!r} in {base} or the working tree (stages: {names})")
            sides = [side for side, present in zip(sides, (in_base, in_head)) if present]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [pool.submit(_synth, side_tree, side_out, stage, label) for side_tree, side_out, label in sides]
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
                status = "new" if stage_name not in old else "removed" if stage_name not in new else ""
                stages.append(
                    StageDiff(
                        stage_name,
                        stacks,
                        _k8s(base_out, head_out, stage_name),
                        status=status,
                        manual=_manual_steps(base_out, head_out, stage_name),
                        idle_gpus=_idle_gpus(base_out, head_out, stage_name),
                    )
                )
            for stack, job in cfn_jobs.values():
                stack.cfn_diff = job.result()
        return DiffResult(base=f"{base} ({commit[:10]})", stages=stages)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=tree, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


# --- what a deploy does not do: Ray pods under upgradeStrategy None; idle GPUs -------------------------

# KubeRay v1.7.0, ray-operator/controllers/ray/rayservice_controller.go: with upgradeStrategy None,
# isZeroDowntimeUpgradeEnabled is false, so shouldPrepareNewCluster never prepares a new RayCluster; and
# shouldUpdateCluster updates the running one only when worker groups are appended at the end. The spec
# hash it compares leaves out replicas and min/max replicas, so those are not applied either. Deleting
# pods does not help (the RayCluster recreates them from its old template); deleting the RayCluster does:
# with no active cluster left, KubeRay prepares a new one from the RayService's current spec.
KUBERAY_VERSION = "1.7.0"
RAY_SERVICE_LABELS = "ray.io/originated-from-cr-name={name},ray.io/originated-from-crd=RayService"


def _documents(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


def _ray_services(out: Path, stage: str) -> dict[tuple[str, str], dict]:
    return {
        ((doc.get("metadata") or {}).get("namespace", "default"), (doc.get("metadata") or {}).get("name", "")): doc.get(
            "spec"
        )
        or {}
        for doc in _documents(out / RENDERED_DIR / stage / INFERENCE_FILE)
        if doc.get("kind") == "RayService"
    }


def _changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """The leaf paths where two JSON-like values differ (`workerGroupSpecs[0].template.spec...`)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            found
            for key in sorted(set(before) | set(after), key=str)
            for found in _changed_paths(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [found for i, (b, a) in enumerate(zip(before, after)) for found in _changed_paths(b, a, f"{path}[{i}]")]
    return [] if before == after else [path or "(all)"]


def _manual_steps(base_out: Path, head_out: Path, stage: str) -> list[str]:
    steps = []
    before_all, after_all = _ray_services(base_out, stage), _ray_services(head_out, stage)
    for (namespace, name), after in sorted(after_all.items()):
        before = before_all.get((namespace, name))
        strategy = (after.get("upgradeStrategy") or {}).get("type")
        if before is None or strategy != "None":
            continue
        changed = _changed_paths(before.get("rayClusterConfig"), after.get("rayClusterConfig"))
        if not changed:
            continue
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        steps.append(
            f"RayService {namespace}/{name}: rayClusterConfig changed ({shown}) under upgradeStrategy None: "
            f"KubeRay {KUBERAY_VERSION} neither updates nor replaces the running Ray pods. After the deploy, run "
            f"`kubectl -n {namespace} delete raycluster -l {RAY_SERVICE_LABELS.format(name=name)}`: KubeRay "
            f"recreates the RayCluster from the new spec (the endpoint is down until the model is loaded again; "
            f"deleting only the pods brings back the old spec)"
        )
    return steps


def _serve_engines(spec: dict) -> list[tuple[str, int, int, int]]:
    """(name, most replicas, TP, PP) of every LLM engine in a RayService's serveConfigV2."""
    config = yaml.safe_load(spec.get("serveConfigV2") or "") or {}
    engines = []
    for app in config.get("applications") or []:
        args = app.get("args") or {}
        named = [(key.removesuffix("_config"), value) for key, value in args.items() if isinstance(value, dict)]
        named += [("engine", value) for value in args.get("llm_configs") or [] if isinstance(value, dict)]
        for label, llm in named:
            if "engine_kwargs" not in llm and "model_loading_config" not in llm:
                continue
            deployment = llm.get("deployment_config") or {}
            scaling = deployment.get("autoscaling_config") or {}
            most = int(deployment.get("num_replicas") or scaling.get("max_replicas") or 1)
            kwargs = llm.get("engine_kwargs") or {}
            engines.append(
                (
                    label,
                    most,
                    int(kwargs.get("tensor_parallel_size") or 1),
                    int(kwargs.get("pipeline_parallel_size") or 1),
                )
            )
    return engines


def _gpu_budget(out: Path, stage: str) -> tuple[int, int, str] | None:
    """(GPUs of the Ray cluster, GPUs the engines use at most, how both were counted), or None."""
    for spec in _ray_services(out, stage).values():
        engines = _serve_engines(spec)
        if not engines:
            return None
        groups = [
            (int(group.get("replicas") or 0), int((group.get("rayStartParams") or {}).get("num-gpus") or 0))
            for group in (spec.get("rayClusterConfig") or {}).get("workerGroupSpecs") or []
        ]
        total = sum(pods * gpus for pods, gpus in groups)
        nodes = " + ".join(f"{pods} GPU node(s) x {gpus} GPU(s)" for pods, gpus in groups) or "no GPU node"
        used = sum(most * tp * pp for _, most, tp, pp in engines)
        parts = " + ".join(
            f"{name} {most} x TP {tp}" + (f" x PP {pp}" if pp > 1 else "") for name, most, tp, pp in engines
        )
        return total, used, f"{nodes} = {total}; replicas at most: {parts} = {used}"
    return None


def _idle_gpus(base_out: Path, head_out: Path, stage: str) -> str:
    after = _gpu_budget(head_out, stage)
    if after is None or after[0] <= after[1]:
        return ""
    total, used, how = after
    before = _gpu_budget(base_out, stage)
    was = ""
    if before is not None and before[0] - before[1] != total - used:
        was = f"; base: {max(0, before[0] - before[1])} idle"
    return (
        f"{total - used} of {total} GPUs stay idle ({how}{was}): raise the replica counts or lower gpu_nodegroup.count"
    )


# --- output ------------------------------------------------------------------------------------------


def text(result: DiffResult) -> str:
    lines = [f"Offline diff: {result.base} -> working tree"]
    dangers = result.dangers
    if dangers:
        lines.append(f"DANGER: {len(dangers)} destructive change(s)")
        lines += [f"  ! {path}: {change.describe()}" for path, change in dangers]
    else:
        lines.append("No replacement or deletion of the cluster, a nodegroup, the VPC or the KMS key.")
    manual = result.manual_steps
    if manual:
        lines.append(f"MANUAL STEP: {len(manual)} change(s) the deploy does not roll out")
        lines += [f"  ! {stage}: {step}" for stage, step in manual]
    for stage, idle in result.idle:
        lines.append(f"IDLE GPUs: {stage}: {idle}")
    for stage in result.stages:
        lines.append(f"\n{stage.title}")
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
    manual = result.manual_steps
    if manual:
        out += ["> [!WARNING]", f"> **{len(manual)} change(s) the deploy does not roll out: manual step**", ">"]
        out += [f"> - `{stage}`: {step}" for stage, step in manual]
        out.append("")
    if result.idle:
        out += ["> [!NOTE]", "> **GPUs left idle by the replica counts**", ">"]
        out += [f"> - `{stage}`: {idle}" for stage, idle in result.idle]
        out.append("")
    out += ["| stage | stack | added | changed | removed | replaced |", "|---|---|---|---|---|---|"]
    for stage in result.stages:
        for stack in stage.stacks:
            replaced = stack.count("replaced") + stack.count("nodes-replaced")
            out.append(
                f"| {stage.stage} | `{stack.path}` | {stack.count('added')} | {stack.count('changed')} | "
                f"{stack.count('removed')} | {replaced} |"
            )
    for stage in result.stages:
        details = [s for s in stage.stacks if s.cfn_diff]
        if not details and not stage.k8s:
            continue
        out += ["", f"### {stage.title}"]
        for stack in details:
            out += [
                "",
                f"<details><summary>CloudFormation: <code>{stack.path}</code> ({stack.summary})</summary>",
                "",
                "```",
                stack.cfn_diff,
                "```",
                "",
                "</details>",
            ]
        for name, diff in stage.k8s.items():
            out += [
                "",
                f"<details open><summary>Kubernetes: <code>{stage.stage}/{name}</code></summary>",
                "",
                "```diff",
                diff.rstrip("\n"),
                "```",
                "",
                "</details>",
            ]
    return "\n".join(out) + "\n"


def check_writable(path: Path) -> None:
    """Fail now, not after the synths, when the Markdown report cannot be written there."""
    if path.is_dir():
        raise DiffError(f"--markdown {path}: is a folder: give a file path (e.g. {path / 'diff.md'})")
    if path.parent.exists() and not path.parent.is_dir():
        raise DiffError(f"--markdown {path}: {path.parent} is a file, not a folder: give a path in an existing folder")
    if not path.parent.is_dir():
        raise DiffError(
            f"--markdown {path}: the folder {path.parent} does not exist: create it, or give a path "
            f"in an existing folder"
        )
    existed = path.exists()
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise DiffError(f"--markdown {path}: cannot write it ({exc.strerror or exc}): give a writable path") from None
    if not existed:
        path.unlink(missing_ok=True)


def write_markdown(path: Path, result: DiffResult) -> None:
    try:
        path.write_text(markdown(result))
    except OSError as exc:
        raise DiffError(f"--markdown {path}: cannot write it ({exc.strerror or exc}): give a writable path") from None


def add_parser(sub) -> None:
    """`python -m ops diff`: the command protocol of ops/__main__.py."""
    cmd = sub.add_parser(
        "diff",
        help="offline diff against a git revision (no AWS access)",
        description="Synthesize REF and the working tree without credentials and compare them.",
    )
    cmd.add_argument("--base", required=True, metavar="REF", help="git revision to compare with (e.g. origin/main)")
    cmd.add_argument("--stage", help="only this stage (default: every stage)")
    cmd.add_argument(
        "--tree",
        metavar="PATH",
        help="the git checkout whose working tree is compared with REF (default: the one around the "
        "current folder); CI runs the base branch's diff code with the pull request's checkout "
        "here, so a pull request cannot change the gate that judges it",
    )
    cmd.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown (for a PR comment)")
    cmd.add_argument(
        "--fail-on-danger",
        action="store_true",
        help="exit 1 when the cluster, a nodegroup, the VPC or the KMS key would be replaced or deleted",
    )


class Terminated(Exception):
    """SIGTERM (or SIGHUP) arrived: raised in the main thread so that every `finally` runs, the temporary
    clones and assemblies of `compute` among them (the default handler ends the process without them)."""


def _terminate(signum, frame) -> None:
    _end_children()
    raise Terminated(signal.Signals(signum).name)


def run(args) -> int:
    handled = (signal.SIGTERM, signal.SIGHUP) if threading.current_thread() is threading.main_thread() else ()
    previous = {sig: signal.signal(sig, _terminate) for sig in handled}
    _stopping.clear()
    try:
        return _run(args)
    except Terminated as exc:
        print(f"diff: stopped by {exc}; its temporary folder is removed", file=sys.stderr)
        return 128 + getattr(signal, str(exc)).value
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _needs_cfn_lint() -> None:
    """The replacement analysis reads CloudFormation's resource schemas from cfn-lint, which the test set-up
    installs and the main job's does not: one line that says what to run, before minutes of synth."""
    try:
        import cfnlint  # noqa: F401
    except ImportError:
        raise DiffError(
            "cfn-lint is not installed in this venv (ops diff reads CloudFormation's resource schemas "
            "from it): run scripts/setup.sh --dev, then ops diff again"
        ) from None


def _run(args) -> int:
    try:
        _needs_cfn_lint()
        if args.markdown:
            check_writable(Path(args.markdown))  # before minutes of synth, not after
        tree = Path(args.tree) if args.tree else None
        if tree is not None and not tree.is_dir():
            raise DiffError(f"--tree {args.tree}: no such folder: give the path of a git checkout")
        result = compute(args.base, stage=args.stage, start=tree)
        print(text(result), end="")
        if args.markdown:
            write_markdown(Path(args.markdown), result)
    except DiffError as exc:
        print(f"diff: {exc}", file=sys.stderr)
        return 2
    return 1 if args.fail_on_danger and result.dangers else 0
