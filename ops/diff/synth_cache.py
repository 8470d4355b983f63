"""Synth output kept between diffs. A side that the base commit's own code synthesizes (the base, and the
tree's stage files on the base's code) is decided by that commit, the stage files in its config/, the stage
asked for and the toolchain that ran it (this venv's packages, Python and Node.js): the same key, the same
cloud assembly, so a second diff against the same base copies it instead of running the synth again.

The tree's own code (--run-tree-code, or this checkout's uncommitted code) is never kept: nothing names it.
Entries are written to a temporary folder and renamed into place, so an interrupted diff leaves none half
written; the least recently used beyond KEEP are removed. The folder also holds the JavaScript packages jsii
extracts for those synths (`packages`), once instead of in each synth's empty HOME."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

FORMAT = 1  # bump when what a side writes, or how it is read, changes
KEEP = 8


def default_folder() -> Path:
    """${XDG_CACHE_HOME:-~/.cache}/pd-inference/diff, beside the project's other machine caches."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pd-inference" / "diff"


@functools.cache
def toolchain() -> str:
    """What besides the tree decides a synth: Python, every installed distribution's version, Node.js."""
    packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    try:
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        node = "none"
    return json.dumps({"python": sys.version, "packages": packages, "node": node.strip()})


def stage_files_digest(tree: Path) -> str:
    """The stage files of a side (config/*.yaml, what trust.copy_stage_files replaces), names and bytes."""
    digest = hashlib.sha256()
    for path in sorted((tree / "config").glob("*.yaml")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@dataclass(frozen=True)
class SynthCache:
    folder: Path

    def key(self, commit: str, tree: Path, stage: str | None) -> str:
        parts = [str(FORMAT), commit, stage or "", stage_files_digest(tree), toolchain()]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]

    @property
    def packages(self) -> Path:
        """jsii's extracted JavaScript packages for the base's synths; a dot name, so never evicted as an entry."""
        return self.folder / ".jsii-packages"

    def restore(self, key: str, out: Path) -> bool:
        """Copy a kept assembly to `out`; False when there is none."""
        entry = self.folder / key
        if not entry.is_dir():
            return False
        shutil.copytree(entry, out)
        os.utime(entry)  # recently used: kept longest
        return True

    def store(self, key: str, out: Path) -> None:
        """Keep `out` under `key` (a temporary copy renamed into place; an existing entry wins)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=self.folder))  # one per thread and process
        except OSError:
            return  # the cache is not writable: the result stands
        try:
            shutil.copytree(out, partial / "entry")
            (partial / "entry").rename(self.folder / key)
            os.utime(self.folder / key)  # copytree gave it the source's time: the newest entry is this one
        except OSError:
            pass  # another side or diff kept the same key first: the result stands
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        self._evict()

    def _evict(self) -> None:
        entries = sorted(self.folder.iterdir(), key=_mtime, reverse=True)
        kept = [p for p in entries if not p.name.startswith(".")]
        # a copy a killed diff left (SIGKILL skips the `finally`) is removed once an hour old
        orphans = [p for p in entries if p.name.startswith(".partial-") and time.time() - _mtime(p) > 3600]
        for stale in kept[KEEP:] + orphans:
            shutil.rmtree(stale, ignore_errors=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
