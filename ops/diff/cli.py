"""`python -m ops diff`: the command protocol of ops/__main__.py (`add_parser(sub)`, `run(args) -> int`).
Every expected failure is one `diff: ...` line and exit 2, found before minutes of synth where it can be
(cfn-lint missing, an unwritable --markdown path, a --tree that is no folder); a line on stderr names each
side as its synth starts. SIGTERM, SIGHUP, SIGQUIT and SIGINT end the children (SIGTERM to their groups, then
SIGKILL: ops/diff/processes.py), remove the temporary folder (a second signal does not cut that short; the
last line says whether it is gone) and exit 128 + the signal. What --tree trusts: its help, and
docs/DEPLOYING.md."""

from __future__ import annotations

import sys
from pathlib import Path

from clients.cli_options import output_folder, path_kind
from clients.signals import EVERY, Terminated, terminating

from . import compare, processes, render, synth_cache
from .model import DiffError, DiffResult
from .schemas import needs_cfn_lint


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
        "current folder). Trusted: the diff code that runs, its venv and its CDK CLI, and REF as resolved in "
        "PATH's repository (give CI's base commit id). From PATH only data is taken: its stage files "
        "(config/*.yaml, _pipeline.yaml), synthesized by REF's code; a change to any other file that synth "
        "runs (app.py, stacks/, charts/, config/*.py, ops/, ...) is reported as not judged, and fails "
        "--fail-on-danger, unless --run-tree-code",
    )
    cmd.add_argument(
        "--run-tree-code",
        action="store_true",
        help="with --tree: also synthesize PATH with its own code, in a sandbox (empty HOME, no AWS or other "
        "variables of yours, no credentials files, no network where unshare -rn works), by this venv and "
        "CDK CLI; its dangers are joined with those REF's code finds in its stage files. That code can "
        "still read and write your files by absolute path: only for a checkout whose code you would run, "
        "or on a host with nothing to steal (the pull-request workflow)",
    )
    cmd.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown (for a PR comment)")
    cmd.add_argument(
        "--json", action="store_true", help="print the report as JSON instead of text (--markdown is still written)"
    )
    cmd.add_argument(
        "--synth-cache",
        metavar="DIR",
        type=output_folder,
        default=synth_cache.default_folder(),
        help="where the synth output of the sides the base's code synthesizes is kept, keyed by the commit, its "
        "stage files, the stage and this venv's packages, Python and Node.js (default: %(default)s)",
    )
    cmd.add_argument(
        "--no-synth-cache", action="store_true", help="synthesize every side again; keep nothing (see --synth-cache)"
    )
    cmd.add_argument(
        "--fail-on-danger",
        action="store_true",
        help="exit 1 when the cluster, a nodegroup, the VPC or the KMS key would be replaced or deleted, when "
        "EKS would refuse the change (a Kubernetes downgrade, a skipped minor version), or when part of the "
        "change could not be judged by trusted code (see --tree)",
    )


def check_writable(path: Path) -> None:
    """Fail now, not after the synths, when the Markdown report cannot be written there: a regular file, or an
    absent one in an existing folder (opening a FIFO to write would wait for a reader, the synths never start)."""
    kind, parent = path_kind(str(path)), path_kind(str(path.parent))
    if kind == "a folder":
        raise DiffError(f"--markdown {path}: is a folder: give a file path (e.g. {path / 'diff.md'})")
    if kind not in ("absent", "a regular file"):
        raise DiffError(f"--markdown {path}: {kind}, not a regular file: give a file path")
    if parent == "absent":
        raise DiffError(
            f"--markdown {path}: the folder {path.parent} does not exist: create it, or give a path "
            f"in an existing folder"
        )
    if parent != "a folder":
        raise DiffError(
            f"--markdown {path}: {path.parent} is {parent}, not a folder: give a path in an existing folder"
        )
    existed = kind != "absent"
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise DiffError(f"--markdown {path}: cannot write it ({exc.strerror or exc}): give a writable path") from None
    if not existed:
        path.unlink(missing_ok=True)


def write_markdown(path: Path, result: DiffResult) -> None:
    try:
        path.write_text(render.markdown(result))
    except OSError as exc:
        raise DiffError(f"--markdown {path}: cannot write it ({exc.strerror or exc}): give a writable path") from None


def run(args) -> int:
    processes.start()
    try:
        # Every terminating signal, Ctrl-C too, ends the synth children first, then the temporary folder is
        # removed; a second signal meanwhile is ignored (clients/signals.py).
        with terminating(before=processes.end_children, signals=EVERY):
            return _run(args)
    except Terminated as exc:
        print(f"diff: stopped by {exc}; {_folder_fate(exc)}", file=sys.stderr)
        return exc.exit_code


def _folder_fate(exc: BaseException) -> str:
    """Whether the stopped diff removed its temporary folder (compare._scratch notes one it could not)."""
    left = [note.removeprefix(compare.LEFT) for note in getattr(exc, "__notes__", []) if note.startswith(compare.LEFT)]
    if left:
        return f"its temporary folder {left[0]} could not be removed: remove it by hand"
    return "its temporary folder is removed"


def _progress(line: str) -> None:
    print(f"diff: {line}", file=sys.stderr, flush=True)


def _run(args) -> int:
    try:
        needs_cfn_lint()
        if args.markdown:
            check_writable(Path(args.markdown))  # before minutes of synth, not after
        tree = Path(args.tree) if args.tree else None
        kind = path_kind(args.tree) if tree is not None else "a folder"
        if kind != "a folder":
            found = "no such folder" if kind == "absent" else f"{kind}, not a folder"
            raise DiffError(f"--tree {args.tree}: {found}: give the path of a git checkout")
        cache = None if args.no_synth_cache else synth_cache.SynthCache(Path(args.synth_cache))
        result = compare.compute(
            args.base, stage=args.stage, start=tree, run_tree_code=args.run_tree_code, cache=cache, progress=_progress
        )
        if args.json:
            print(render.as_json(result))
        else:
            print(render.text(result), end="")
        if args.markdown:
            write_markdown(Path(args.markdown), result)
    except DiffError as exc:
        print(f"diff: {exc}", file=sys.stderr)
        return 2
    return 1 if args.fail_on_danger and result.fails else 0
