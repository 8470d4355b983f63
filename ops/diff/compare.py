"""Both sides of a diff: the base revision in a temporary worktree and the working tree, each synthesized
(only the side that has the stage, for a stage added or removed by the change), compared stack by stack and
stage by stage."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import tempfile
from pathlib import Path

from . import worktree
from .cfn_diff import cdk, cfn_diff
from .kubernetes import k8s_diffs
from .model import DiffError, DiffResult, StackDiff, StageDiff
from .notes import idle_gpus, image_bumps, manual_steps, operator_bumps
from .synth import assemblies, stage_names, synth
from .templates import resource_changes


def compute(base: str, *, stage: str | None = None, start: Path | None = None, cfn: bool = True) -> DiffResult:
    """Diff the working tree of the checkout around `start` (default: the current folder) against `base`."""
    tree = worktree.repo_root(start or Path.cwd())
    cdk(tree)
    work = Path(tempfile.mkdtemp(prefix="pd-diff-"))
    base_tree, base_out, head_out = work / "base", work / "base.out", work / "head.out"
    try:
        commit = worktree.add(tree, base, base_tree)
        sides = [(base_tree, base_out, f"base {base}"), (tree, head_out, "working tree")]
        if stage:
            # A stage of only one side (added or removed by the change) is synthesized on that side alone:
            # the other has nothing, so every resource is added (or removed).
            in_base, in_head = stage in stage_names(base_tree), stage in stage_names(tree)
            if not in_base and not in_head:
                names = ", ".join(sorted(set(stage_names(base_tree)) | set(stage_names(tree)))) or "none"
                raise DiffError(f"no stage named {stage!r} in {base} or the working tree (stages: {names})")
            sides = [side for side, present in zip(sides, (in_base, in_head), strict=True) if present]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            jobs = [pool.submit(synth, side_tree, side_out, stage, label) for side_tree, side_out, label in sides]
            for job in jobs:
                job.result()
        old, new = assemblies(base_out), assemblies(head_out)
        empty = work / "empty.template.json"
        empty.write_text("{}")
        stages: list[StageDiff] = []
        cfn_jobs: dict[str, tuple[StackDiff, concurrent.futures.Future[str]]] = {}
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
                        cfn_jobs[path] = (stack, pool.submit(cfn_diff, tree, head_out, path, before_file or empty))
                    elif not after_file:
                        stack.cfn_diff = f"stack {path} is removed"
                    stacks.append(stack)
                status = "new" if stage_name not in old else "removed" if stage_name not in new else ""
                stages.append(
                    StageDiff(
                        stage_name,
                        stacks,
                        k8s_diffs(base_out, head_out, stage_name),
                        status=status,
                        manual=manual_steps(base_out, head_out, stage_name)
                        + image_bumps(base_out, head_out, stage_name)
                        + operator_bumps(base_out, head_out, stage_name),
                        idle_gpus=idle_gpus(base_out, head_out, stage_name),
                    )
                )
            for stack, cfn_job in cfn_jobs.values():
                stack.cfn_diff = cfn_job.result()
        return DiffResult(base=f"{base} ({commit[:10]})", stages=stages)
    finally:
        worktree.remove(tree, base_tree)
        shutil.rmtree(work, ignore_errors=True)
