"""What of the compared tree is trusted. The stage files (config/*.yaml, _pipeline.yaml among them) are data:
the base's code synthesizes them (a copy of the base revision with the tree's stage files in config/). Any
other changed file that synthesis can run (app.py, stacks/, charts/, config/*.py, ops/, cdk.json, ...) is
code: it runs only when the caller allows it, and then in a sandbox (synth.sandbox_argv / synth.env)."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from .model import DiffError
from .worktree import git

# Changed paths that a synth never reads (app.py imports config, charts, stacks and ops; cdk.json and the
# requirement and package files decide what runs): everything not listed here counts as code.
INERT_PREFIXES = ("docs/", "tests/", ".github/")
INERT_SUFFIXES = (".md",)


def is_stage_file(path: str) -> bool:
    """config/<name>.yaml directly in config/ (config/loader.py's stage_files globs `*.yaml` there)."""
    parts = path.split("/")
    return len(parts) == 2 and parts[0] == "config" and parts[1].endswith(".yaml")


def changed_paths(tree: Path, commit: str) -> list[str]:
    """Every path the working tree changes against `commit`: tracked changes and untracked files that git
    does not ignore (`git diff --name-only` and `git ls-files --others --exclude-standard`)."""
    tracked = git(tree, "diff", "--name-only", "-z", "--no-renames", commit)
    untracked = git(tree, "ls-files", "--others", "--exclude-standard", "-z")
    for run in (tracked, untracked):
        if run.returncode != 0:
            raise DiffError(f"git could not list the working tree's changes: {run.stderr.strip()}")
    names = tracked.stdout.split("\0") + untracked.stdout.split("\0")
    return sorted({name for name in names if name})


def code_changes(paths: list[str]) -> list[str]:
    """The changed paths that are neither stage files nor inert (docs, tests, Markdown)."""
    return [
        path
        for path in paths
        if not is_stage_file(path) and not path.startswith(INERT_PREFIXES) and not path.endswith(INERT_SUFFIXES)
    ]


def copy_stage_files(tree: Path, data_tree: Path) -> None:
    """Replace the stage files of `data_tree` (a copy of the base) with the tree's. Regular files only: a
    symlink could make the base's code read, and the report print, any file of the caller."""
    folder = tree / "config"
    if folder.is_symlink() or not folder.is_dir():  # a link would lead the glob, and the report, out of the tree
        raise DiffError(f"{folder}: not a folder of the tree (a symlink or other): config/ must be a plain folder")
    for old in (data_tree / "config").glob("*.yaml"):
        old.unlink()
    for source in sorted(folder.glob("*.yaml")):
        mode = source.lstat().st_mode
        if not stat.S_ISREG(mode):
            raise DiffError(
                f"{source}: not a regular file (a symlink or other): the stage files of the compared tree "
                f"must be plain files"
            )
        shutil.copyfile(source, data_tree / "config" / source.name, follow_symlinks=False)
