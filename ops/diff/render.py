"""The report of a diff: plain text (the command's output), Markdown (a pull request comment) and JSON
(--json, for pipelines). Dangers, manual steps, idle GPUs and notes come first."""

from __future__ import annotations

import json

from .model import DiffResult, StageDiff

NO_DANGER = "No replacement or deletion of the cluster, a nodegroup, the VPC or the KMS key."


def text(result: DiffResult) -> str:
    lines = [f"Offline diff: {result.base} -> working tree", *_text_callouts(result)]
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


def _text_callouts(result: DiffResult) -> list[str]:
    """The dangers (or the line that there are none), manual steps, idle GPUs, notes, unjudged parts, trust."""
    lines = []
    dangers = result.dangers
    if dangers:
        lines.append(f"DANGER: {len(dangers)} destructive change(s)")
        lines += [f"  ! {path}: {change.describe()}" for path, change in dangers]
    else:
        lines.append(NO_DANGER)
    manual = result.manual_steps
    if manual:
        lines.append(f"MANUAL STEP: {len(manual)} change(s) the deploy does not roll out")
        lines += [f"  ! {stage}: {step}" for stage, step in manual]
    for name, idle in result.idle:
        lines.append(f"IDLE GPUs: {name}: {idle}")
    notes = result.notes
    if notes:
        lines.append(f"NOTE: {len(notes)} thing(s) to know before the deploy")
        lines += [f"  - {stage}: {note}" for stage, note in notes]
    if result.unjudged:
        lines.append(f"NOT JUDGED: {len(result.unjudged)} part(s) of the change (--fail-on-danger fails on them)")
        lines += [f"  ! {item}" for item in result.unjudged]
    return lines + [f"TRUST: {line}" for line in result.trust]


def markdown(result: DiffResult) -> str:
    out = [f"## Infrastructure diff against `{result.base}`", ""]
    out += _md_callouts(result)
    out += [f"Trust: {_md(line)}" for line in result.trust] + ([""] if result.trust else [])
    out += _md_table(result)
    for stage in result.stages:
        out += _md_details(stage)
    return "\n".join(out) + "\n"


def _md_callouts(result: DiffResult) -> list[str]:
    """The dangers (or the line that there are none), manual steps, idle GPUs, notes and unjudged parts."""
    out: list[str] = []
    dangers = result.dangers
    if dangers:
        out += ["> [!CAUTION]", f"> **{len(dangers)} destructive change(s)**", ">"]
        out += [f"> - `{path}`: {change.describe()}" for path, change in dangers]
        out.append("")
    else:
        out += [NO_DANGER, ""]
    manual = result.manual_steps
    if manual:
        out += ["> [!WARNING]", f"> **{len(manual)} change(s) the deploy does not roll out: manual step**", ">"]
        out += [f"> - `{stage}`: {step}" for stage, step in manual]
        out.append("")
    if result.idle:
        out += ["> [!NOTE]", "> **GPUs left idle by the replica counts**", ">"]
        out += [f"> - `{stage}`: {idle}" for stage, idle in result.idle]
        out.append("")
    if result.notes:
        out += ["> [!NOTE]", "> **To know before the deploy**", ">"]
        out += [f"> - `{stage}`: {_md(note)}" for stage, note in result.notes]  # principal ARNs from the tree
        out.append("")
    if result.unjudged:
        out += ["> [!CAUTION]", f"> **{len(result.unjudged)} part(s) of the change not judged by trusted code**", ">"]
        out += [f"> - {_md(item)}" for item in result.unjudged]
        out.append("")
    return out


def _md_table(result: DiffResult) -> list[str]:
    out = ["| stage | stack | added | changed | removed | replaced |", "|---|---|---|---|---|---|"]
    for stage in result.stages:
        for stack in stage.stacks:
            replaced = stack.count("replaced") + stack.count("nodes-replaced")
            out.append(
                f"| {stage.stage} | `{stack.path}` | {stack.count('added')} | {stack.count('changed')} | "
                f"{stack.count('removed')} | {replaced} |"
            )
    return out


def _md_details(stage: StageDiff) -> list[str]:
    """One stage's CloudFormation and Kubernetes diffs, each folded; nothing when it has neither."""
    details = [s for s in stage.stacks if s.cfn_diff]
    if not details and not stage.k8s:
        return []
    out = ["", f"### {stage.title}"]
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
    return out


def _md(line: str) -> str:
    """A line that carries the tree's file names, as plain Markdown text: no HTML, code span, table cell or
    line break of the name's own (git allows any byte but NUL in a path)."""
    for raw, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("`", "&#96;"), ("|", "&#124;")):
        line = line.replace(raw, escaped)
    return " ".join(line.splitlines())


def as_json(result: DiffResult) -> str:
    """The report as one JSON document (--json): what the text says, as data."""

    def change(item) -> dict:
        return {
            "logical_id": item.logical_id,
            "type": item.type,
            "action": item.action,
            "because": list(item.because),
            "dangerous": item.dangerous,
            "text": item.describe(),
        }

    return json.dumps(
        {
            "command": "diff",
            "base": result.base,
            "dangerous": bool(result.dangers),
            "fails": result.fails,  # what --fail-on-danger exits 1 on: a danger, or a part not judged
            "unjudged": list(result.unjudged),
            "trust": list(result.trust),
            "dangers": [{"stack": path, **change(item)} for path, item in result.dangers],
            "manual_steps": [{"stage": stage, "text": step} for stage, step in result.manual_steps],
            "idle_gpus": [{"stage": stage, "text": idle} for stage, idle in result.idle],
            "notes": [{"stage": stage, "text": note} for stage, note in result.notes],
            "stages": [
                {
                    "stage": stage.stage,
                    "status": stage.status or "both",  # new | removed | both
                    "stacks": [
                        {
                            "path": stack.path,
                            **{action: stack.count(action) for action in ("added", "changed", "removed")},
                            "replaced": stack.count("replaced") + stack.count("nodes-replaced"),
                            "changes": [change(item) for item in stack.changes],
                            "cloudformation_diff": stack.cfn_diff,
                        }
                        for stack in stage.stacks
                    ],
                    "kubernetes_diffs": dict(stage.k8s),
                }
                for stage in result.stages
            ],
        },
        indent=2,
    )
