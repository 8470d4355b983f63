"""`diff --base REF`: what a change does to every stage, offline, for pull-request review.

Synthesizes the base revision (in a temporary git worktree) and the working tree, each in a sandbox
without credentials (ops/diff/synth.py); of another checkout (--tree) only the stage files are taken as
data, on the base's code, unless --run-tree-code (ops/diff/trust.py, docs/DEPLOYING.md). Then per stage: `cdk diff --template` of each stack against the base template, a unified
diff of the rendered Kubernetes YAML and Helm values, and a summary per stack (added / changed /
removed / replaced). Replacing or deleting the cluster, a nodegroup, the VPC or the KMS key, a
launch-template change that rolls a nodegroup's nodes, and a Kubernetes version EKS refuses (a downgrade, a
skipped minor) are listed first as dangers.

Replacement is decided from CloudFormation's own resource schemas (the `createOnlyProperties` that
cfn-lint ships): a change to one of those properties replaces the resource.

A note per stage comes from the rendered Kubernetes YAML: a change to the RayService's `rayClusterConfig`
(the Ray pods) under `upgradeStrategy: None`, which KubeRay does not roll out (the manual step is printed);
another from each side's stage file: GPUs that the replica counts leave idle (config's own warning). A stage that exists only in the
working tree (or only in the base) is reported as new (or removed): every resource added (or removed).
From the templates: the nodegroups a Kubernetes upgrade leaves on the old kubelet (a manual step), and notes
on access entries (principal, account, access) and on a nodegroup scale-in (EKS picks the nodes).

One concern a module:
  worktree    the git checkout the command runs in, and the base revision in a temporary git worktree
  trust       what of the compared tree is data (stage files) and what is code; the stage files' copy
  synth       synth of one side in a sandbox (no credentials, HOME, network); cloud assemblies, stage names
  synth_cache the output of the sides the base's code synthesizes, kept by commit, stage files and toolchain
  processes   the child processes (synths, git, cdk diff), ended on a terminating signal (Ctrl-C too)
  templates   the template diff: resource changes between two templates of a stack
  schemas     CloudFormation's resource schemas from cfn-lint (createOnlyProperties: what replaces)
  danger      which changes are destructive or refused by EKS, and their one-line description
  cfn_diff    `cdk diff --template` of a stack against the base template
  kubernetes  unified diffs of the rendered Kubernetes files; the RayService specs
  notes       the manual step under upgradeStrategy None, idle GPUs
  template_notes  nodegroups behind after an upgrade, access entries, scale-ins (from the templates)
  compare     both sides synthesized and compared: the DiffResult (model)
  render      the text, Markdown and JSON reports
  cli         the command: options, one-line errors, progress on stderr, signals
"""

from __future__ import annotations

from .cli import add_parser, check_writable, run, write_markdown
from .compare import compute
from .danger import DANGEROUS_TYPES, ResourceChange
from .model import DiffError, DiffResult, StackDiff, StageDiff
from .render import as_json, markdown, text
from .templates import resource_changes
from .worktree import repo_root

__all__ = [
    "DANGEROUS_TYPES",
    "DiffError",
    "DiffResult",
    "ResourceChange",
    "StackDiff",
    "StageDiff",
    "add_parser",
    "as_json",
    "check_writable",
    "compute",
    "markdown",
    "repo_root",
    "resource_changes",
    "run",
    "text",
    "write_markdown",
]
