"""The diffs of these tests keep their synth output in one folder per test session (a worker's, under
pytest-xdist), not in the user's cache: every diff against this checkout's HEAD after the first copies the base.
The clone a diff test changes, and the pull request's checkout that is that clone."""

from __future__ import annotations

import subprocess

import pytest

from ops.diff import synth_cache

from ..helpers import ROOT


@pytest.fixture(scope="session")
def session_synth_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("synth-cache")


@pytest.fixture(autouse=True)
def _synth_cache_of_the_session(session_synth_cache, monkeypatch):
    monkeypatch.setattr(synth_cache, "default_folder", lambda: session_synth_cache)


@pytest.fixture
def clone(tmp_path):
    """This repository's committed state, with a committer (the CDK CLI is this checkout's own: ops/diff/cfn_diff.py)."""
    repo = tmp_path / "main"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
    for key, value in (("user.email", "test@example.invalid"), ("user.name", "test")):
        subprocess.run(["git", "config", key, value], cwd=repo, check=True)
    return repo


@pytest.fixture
def pull_request(clone):
    """The pull request's checkout: a clone of this repository's committed state."""
    return clone
