"""What a diff found: per stage, its stacks' resource changes and CloudFormation diffs, its Kubernetes
diffs and notes; and the one error type every step raises (one line: which step failed and why)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .danger import ResourceChange


class DiffError(Exception):
    """One line: which step failed and why."""


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
    notes: list[str] = field(default_factory=list)  # what the diff does not say: access entries, scale-ins

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
    # What produced the working-tree side (ops/diff/trust.py): one line each, printed with the report.
    trust: list[str] = field(default_factory=list)
    # Dangers the base's code found in the tree's stage files that the tree's own code did not report.
    also_dangers: list[tuple[str, ResourceChange]] = field(default_factory=list)
    # What the gate could not judge with trusted code (unsynthesized code changes, stage files the base's code
    # rejects): --fail-on-danger fails on these as on a danger.
    unjudged: list[str] = field(default_factory=list)

    @property
    def dangers(self) -> list[tuple[str, ResourceChange]]:
        own = [
            (stack.path, change)
            for stage in self.stages
            for stack in stage.stacks
            for change in stack.changes
            if change.dangerous
        ]
        return own + self.also_dangers

    @property
    def fails(self) -> bool:
        """What --fail-on-danger exits 1 on."""
        return bool(self.dangers or self.unjudged)

    @property
    def manual_steps(self) -> list[tuple[str, str]]:
        return [(stage.stage, step) for stage in self.stages for step in stage.manual]

    @property
    def notes(self) -> list[tuple[str, str]]:
        return [(stage.stage, note) for stage in self.stages for note in stage.notes]

    @property
    def idle(self) -> list[tuple[str, str]]:
        return [(stage.stage, stage.idle_gpus) for stage in self.stages if stage.idle_gpus]
