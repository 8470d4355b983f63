"""The git side: the checkout the command runs in (its working tree is the `head` side), and the base
revision checked out into a temporary git worktree of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .model import DiffError
from .processes import child

# The compared tree's repository may be someone else's: none of its hooks (post-checkout runs on `worktree
# add`) and no fsmonitor program (run on an index refresh) runs (git-config(1) core.hooksPath, core.fsmonitor).
SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return child(["git", *SAFE, *args], cwd=cwd, timeout=300)
    except FileNotFoundError:
        raise DiffError(
            "git is not installed (or not on PATH): install git; diff builds the base revision in a git worktree"
        ) from None
    except subprocess.TimeoutExpired:
        raise DiffError(f"git {args[0]} did not finish within 300 s in {cwd}") from None


def repo_root(start: Path) -> Path:
    """The git checkout the command runs in (its working tree is the `head` side)."""
    found = git(start, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise DiffError(f"{start} is not inside a git checkout: run diff in a clone of the project")
    return Path(found.stdout.strip())


def add(repo: Path, ref: str, where: Path) -> str:
    """Check `ref` out into a detached worktree at `where`; its full commit id."""
    resolved = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if resolved.returncode != 0:
        raise DiffError(f"{ref!r} is not a commit in this repository")
    commit = resolved.stdout.strip()
    added = git(repo, "worktree", "add", "--detach", "--quiet", str(where), commit)
    if added.returncode != 0:
        raise DiffError(f"git worktree add failed: {added.stderr.strip()}")
    return commit


def remove(repo: Path, where: Path) -> None:
    """Remove the worktree (whatever state it is in); never fails."""
    subprocess.run(
        ["git", *SAFE, "worktree", "remove", "--force", str(where)], cwd=repo, capture_output=True, check=False
    )
