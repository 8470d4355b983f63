"""Both sides of a diff: the base revision in a temporary worktree and the compared tree, each synthesized in
a sandbox (only the sides that have the stage, for a stage added or removed by the change), compared stack
by stack and stage by stage. What the tree contributes is decided in ops/diff/trust.py: its stage files
always, on the base's code; its own code only when allowed (--run-tree-code, or the tree is this checkout)."""

from __future__ import annotations

import concurrent.futures
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from clients.signals import deferred

from . import template_notes, trust, worktree
from .cfn_diff import cdk, cfn_diff
from .kubernetes import k8s_diffs
from .model import DiffError, DiffResult, StackDiff, StageDiff
from .notes import idle_gpus, image_bumps, manual_steps, operator_bumps
from .synth import assemblies, network_note, stage_account, stage_names, synth
from .synth_cache import SynthCache
from .template_notes import TemplateNotes
from .templates import resource_changes

LEFT = "temporary folder left: "


@dataclass
class Side:
    tree: Path
    out: Path
    label: str
    sandbox: Path
    base_code: bool = True  # synthesized by the base commit's code: its output may be kept (synth_cache)


@dataclass
class Plan:
    base: Side
    head: Side  # the side the report shows
    check: Side | None = None  # the tree's stage files on the base's code, judged too when head ran tree code
    trust: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)


def compute(
    base: str,
    *,
    stage: str | None = None,
    start: Path | None = None,
    cfn: bool = True,
    run_tree_code: bool = False,
    cache: SynthCache | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> DiffResult:
    """Diff the working tree of the checkout around `start` (default: the current folder) against `base`.
    With `start` the tree is another checkout (a pull request): untrusted, its code runs only with
    `run_tree_code`. Without it the tree is the checkout this code runs from (`python -m ops` imports it).
    With `cache`, the sides the base's code synthesizes are copied from an earlier diff's when kept there.
    `progress` is told each side as its synth starts (tens of seconds each)."""
    tree = worktree.repo_root(start or Path.cwd())
    cdk()
    with _scratch(tree) as work:
        commit = worktree.add(tree, base, work / "base")
        how = Synthesis(base, commit, stage, cache, progress)
        code = trust.code_changes(trust.changed_paths(tree, commit))
        untrusted = start is not None
        plan = _plan(tree, how, work, code, untrusted=untrusted, run_code=run_tree_code or not untrusted)
        result = _judge(plan, how, work, cfn)
        result.base = f"{base} ({commit[:10]})"
        return result


@contextmanager
def _scratch(tree: Path) -> Iterator[Path]:
    """The diff's temporary folder, made and removed with the base's worktrees in steps no signal cuts in two
    (clients/signals.py: one that arrives meanwhile is raised after, a second one is ignored). When a stopped
    diff could not remove it, the exception carries a note `LEFT <folder>` (the command prints it)."""
    made: list[Path] = []
    try:
        with deferred():
            made.append(Path(tempfile.mkdtemp(prefix="pd-diff-")))
        yield made[0]
    except BaseException as exc:
        for work in made:
            _remove(tree, work)
            if work.exists():
                exc.add_note(f"{LEFT}{work}")
        raise
    _remove(tree, made[0])


def _remove(tree: Path, work: Path) -> None:
    with deferred():
        for name in ("base", "data"):
            worktree.remove(tree, work / name)
        shutil.rmtree(work, ignore_errors=True)


def _data_side(tree: Path, commit: str, work: Path) -> Side:
    """The base revision with the tree's stage files: what the base's code makes of the tree's data."""
    worktree.add(tree, commit, work / "data")
    trust.copy_stage_files(tree, work / "data")
    return Side(work / "data", work / "data.out", "working tree's stage files on the base's code", work / "sbx-data")


def _plan(tree: Path, how: Synthesis, work: Path, code: list[str], *, untrusted: bool, run_code: bool) -> Plan:
    commit = how.commit
    base = Side(work / "base", work / "base.out", f"base at {how.base} ({commit[:10]})", work / "sbx-base")
    listed = ", ".join(code[:8]) + (f" and {len(code) - 8} more" if len(code) > 8 else "")
    if not code:
        data = _data_side(tree, commit, work)
        return Plan(base, data, trust=["working tree: no code change; its stage files, synthesized by the base's code"])
    if not run_code:
        data = _data_side(tree, commit, work)
        return Plan(
            base,
            data,
            trust=["working tree: its stage files, synthesized by the base's code"],
            unjudged=[f"code changes not synthesized ({listed}): pass --run-tree-code to synthesize them, sandboxed"],
        )
    own = Side(tree, work / "head.out", "working tree", work / "sbx-head", base_code=False)
    note = (
        f"working tree: synthesized by its own code ({listed}); sandboxed: empty HOME, no credentials, {network_note()}"
    )
    if not untrusted:
        return Plan(base, own, trust=[note])
    note += "; joined with the dangers the base's code finds in its stage files"
    return Plan(base, own, check=_data_side(tree, commit, work), trust=[note])


def _present(plan: Plan, base: str, stage: str | None) -> list[Side]:
    """The sides that have the stage (all, without one); a stage on neither side is an error."""
    sides = [side for side in (plan.base, plan.head, plan.check) if side]
    if not stage:
        return sides
    names = {id(side): stage_names(side.tree) for side in sides}
    if not any(stage in found for found in names.values()):
        every = ", ".join(sorted(set().union(*names.values()))) or "none"
        raise DiffError(f"no stage named {stage!r} in {base} or the working tree (stages: {every})")
    return [side for side in sides if stage in names[id(side)]]


@dataclass(frozen=True)
class Synthesis:
    base: str  # as the caller named it
    commit: str
    stage: str | None
    cache: SynthCache | None
    progress: Callable[[str], None]


def _synthesize(side: Side, how: Synthesis) -> None:
    """One side's synth, or its kept copy: only a side of the base's code is looked up and kept, and only it
    shares jsii's extracted packages (the tree's code could rewrite what a later synth loads)."""
    kept = how.cache if side.base_code else None
    key = kept.key(how.commit, side.tree, how.stage) if kept else ""
    if kept and kept.restore(key, side.out):
        how.progress(f"the {side.label}: copied from an earlier diff's synth ({kept.folder})")
        return
    how.progress(f"synthesizing the {side.label}")
    synth(side.tree, side.out, how.stage, side.label, side.sandbox, kept.packages if kept else None)
    if kept:
        kept.store(key, side.out)


def _judge(plan: Plan, how: Synthesis, work: Path, cfn: bool) -> DiffResult:
    base = how.base
    sides = _present(plan, base, how.stage)
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        jobs = {id(side): pool.submit(_synthesize, side, how) for side in sides}
        for side in (plan.base, plan.head):
            if id(side) in jobs:
                jobs[id(side)].result()
        check = _checked(plan, jobs)
    result = DiffResult(base, _stages(plan.base, plan.head, work, cfn), trust=plan.trust)
    result.unjudged = plan.unjudged
    if check is not None:
        seen = {(path, change.logical_id, change.action) for path, change in result.dangers}
        also = DiffResult(base, _stages(plan.base, check, work, False)).dangers
        result.also_dangers = [(p, c) for p, c in also if (p, c.logical_id, c.action) not in seen]
    return result


def _checked(plan: Plan, jobs: dict[int, concurrent.futures.Future[None]]) -> Side | None:
    """The check side (the tree's stage files on the base's code), once synthesized; None when there is none
    or its synth failed, which is then a part not judged (the stage files need the tree's own code)."""
    if plan.check is None or id(plan.check) not in jobs:
        return None
    try:
        jobs[id(plan.check)].result()
    except DiffError as exc:
        plan.unjudged.append(f"{exc}: only the tree's own code judged its stage files")
        return None
    return plan.check


def _stacks(
    stage: str, before: dict[str, Path], after: dict[str, Path], account: str | None
) -> tuple[list[StackDiff], TemplateNotes]:
    """Each stack of a stage compared, and what its templates say that its diff does not (template_notes)."""
    stacks, manual, notes = [], [], []
    for path in sorted({*before, *after}):
        old = json.loads(before[path].read_text()) if path in before else {}
        new = json.loads(after[path].read_text()) if path in after else {}
        stack = StackDiff(stage, path, resource_changes(old, new))
        if path not in after:
            stack.cfn_diff = f"stack {path} is removed"
        stacks.append(stack)
        found = template_notes.read(old, new, account)
        manual += found.manual
        notes += found.notes
    return stacks, TemplateNotes(manual, notes)


def _stages(base: Side, head: Side, work: Path, cfn: bool) -> list[StageDiff]:
    """Every stage of either side, its stacks compared; `cdk diff` of each changed stack (with `cfn`)."""
    base_out, head_out = base.out, head.out
    old, new = assemblies(base_out), assemblies(head_out)
    empty = work / "empty.template.json"
    empty.write_text("{}")
    stages: list[StageDiff] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        cfn_jobs = []
        for stage_name in sorted(set(old) | set(new)):
            before, after = old.get(stage_name, {}), new.get(stage_name, {})
            stacks, found = _stacks(stage_name, before, after, stage_account(head_out, stage_name))
            for stack in stacks:
                if cfn and stack.path in after and stack.changes:
                    job = pool.submit(cfn_diff, work / "sbx-cdk", head_out, stack.path, before.get(stack.path, empty))
                    cfn_jobs.append((stack, job))
            stages.append(_stage(stage_name, stacks, found, base, head, old, new))
        for stack, job in cfn_jobs:
            stack.cfn_diff = job.result()
    return stages


def _stage(
    name: str, stacks: list[StackDiff], found: TemplateNotes, base: Side, head: Side, old: dict, new: dict
) -> StageDiff:
    status = "new" if name not in old else "removed" if name not in new else ""
    base_out, head_out = base.out, head.out
    manual = (
        manual_steps(base_out, head_out, name)
        + image_bumps(base_out, head_out, name)
        + operator_bumps(base_out, head_out, name)
        + found.manual
    )
    return StageDiff(
        name,
        stacks,
        k8s_diffs(base_out, head_out, name),
        status=status,
        manual=manual,
        idle_gpus=idle_gpus(base.tree, head.tree, name),
        notes=found.notes,
    )
