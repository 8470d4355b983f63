"""Session fixtures: the real stage files synthesized once (with cdk-nag), shared by all tests."""

from __future__ import annotations

import signal

import pytest

from config import load_stages

from .helpers import Synth, synth


def pytest_configure(config):
    # A suite started in the background inherits SIGINT ignored (the shell's rule for background jobs), and every
    # process it starts would too; Ctrl-C's tests need the disposition a terminal gives, so the suite resets it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items):
    # Under pytest-xdist (scripts/test.sh): a file's tests run on one worker, so a module fixture is built once,
    # not on each worker or again each time the worker comes back to the file; the tests of the real control
    # plane share one worker, as they share its session fixtures (--dist loadgroup).
    for item in items:
        parts = item.path.relative_to(item.config.rootpath).parts
        group = "cluster" if parts[1:2] == ("cluster",) else "/".join(parts)
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def stages():
    return {cfg.stage: cfg for cfg in load_stages()}


@pytest.fixture(scope="session")
def app_synth(stages, tmp_path_factory) -> Synth:
    """dev and prod, synthesized once per test session exactly as app.py does it."""
    return synth(list(stages.values()), tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def dev(stages):
    return stages["dev"]
