"""The diffs of these tests keep their synth output in one folder per test session (a worker's, under
pytest-xdist), not in the user's cache: every diff against this checkout's HEAD after the first copies the base."""

from __future__ import annotations

import pytest

from ops.diff import synth_cache


@pytest.fixture(scope="session")
def session_synth_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("synth-cache")


@pytest.fixture(autouse=True)
def _synth_cache_of_the_session(session_synth_cache, monkeypatch):
    monkeypatch.setattr(synth_cache, "default_folder", lambda: session_synth_cache)
