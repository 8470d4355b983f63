"""Synth of one side (the base worktree, the base with the tree's stage files, or the tree's own code), each
in a sandbox, and what it wrote: the cloud assembly of every stage (its stacks' templates, the account they
are bound to) and the stage names of a tree.

The sandbox (every synth and `cdk diff`): an environment of a few named variables only (no AWS_*, CDK_*,
tokens or proxies of the caller), an empty HOME and TMPDIR of its own inside the diff's temporary folder
(no ~/.aws, ~/.cdk.json, ~/.npmrc; jsii's leftovers are removed with the folder; a synth of the base's code
extracts jsii's packages once into the synth cache's folder), the running venv's Python
with -E -s (no PYTHON* variables, no user site), and no network where the kernel lets an unprivileged user
make a network namespace (`unshare -rn`, util-linux unshare(1)). It does not hide the caller's files from
code that opens them by absolute path: run a tree's code (--run-tree-code) only where that is acceptable."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

from .model import DiffError
from .processes import child

SYNTH_TIMEOUT = 600
# The caller's variables a synth keeps: the programs (node, git) and the locale; nothing else.
KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")


def env(outdir: Path, stage: str | None, sandbox: Path, packages: Path | None = None) -> dict[str, str]:
    """The environment of a synth (and of `cdk diff`): named variables only, HOME and TMPDIR in `sandbox`.
    `packages`: where jsii keeps the JavaScript packages it extracts (aws-cdk-lib and the rest), shared by
    synths of the base's code; without it they go to the empty HOME, ~6 s of every synth."""
    home, tmp = sandbox / "home", sandbox / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    env = {key: os.environ[key] for key in KEPT if key in os.environ}
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        CDK_OUTDIR=str(outdir),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE="/dev/null",
        AWS_SHARED_CREDENTIALS_FILE="/dev/null",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CDK_DISABLE_CLI_TELEMETRY="true",
    )
    if stage:
        env["CDK_CONTEXT_JSON"] = json.dumps({"stage": stage})
    if packages is not None:
        env["JSII_RUNTIME_PACKAGE_CACHE_ROOT"] = str(packages)  # jsii 1.142 lib/program.js openCache
    return env


@functools.cache
def no_network() -> list[str]:
    """The prefix that runs a command without network (`unshare -rn`: a user and a network namespace of its
    own, only a down loopback inside), or [] where the kernel refuses unprivileged user namespaces."""
    try:
        probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return ["unshare", "-rn", "--"] if probe.returncode == 0 else []


def network_note() -> str:
    return "no network" if no_network() else "network NOT isolated (unshare -rn is refused on this host)"


def synth(tree: Path, outdir: Path, stage: str | None, label: str, sandbox: Path, packages: Path | None = None) -> None:
    argv = [*no_network(), sys.executable, "-E", "-s", "app.py"]
    try:
        run = child(argv, cwd=tree, env=env(outdir, stage, sandbox, packages), timeout=SYNTH_TIMEOUT)
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


def stage_account(outdir: Path, stage: str) -> str | None:
    """The account a stage's stacks are bound to (its stage file's `account`); None when they are not (the
    deploying credentials' account, unknown offline)."""
    manifest = outdir / f"assembly-{stage}" / "manifest.json"
    if not manifest.is_file():
        return None
    for artifact in json.loads(manifest.read_text())["artifacts"].values():
        account = (artifact.get("environment") or "").removeprefix("aws://").split("/")[0]
        if account.isdigit():
            return account
    return None
