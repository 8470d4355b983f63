"""Session fixtures: the real stage files synthesized once (with cdk-nag), shared by all tests."""

from __future__ import annotations

import signal

import pytest

from config import load_stages

from .helpers import Synth, larger_model, synth


def pytest_configure(config):
    # A suite started in the background inherits SIGINT ignored (the shell's rule for background jobs), and every
    # process it starts would too; Ctrl-C's tests need the disposition a terminal gives, so the suite resets it.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` in work units (tests/work_units.py): a file, or the real control plane's tests."""
    if config.getvalue("dist") != "loadfile":
        return None
    from .work_units import ByWorkUnit

    return ByWorkUnit(config, log)


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


@pytest.fixture(scope="session")
def dev_unsized(stages):
    """dev without its fixed KV cache (extra_args.kv_cache_memory_bytes): vLLM sizes it from
    gpu_memory_utilization at start, which the rehearsal's KV profile exists for."""
    dev = stages["dev"]
    args = {k: v for k, v in dev.serving.engine.extra_args.items() if k != "kv_cache_memory_bytes"}
    engine = dev.serving.engine.model_copy(update={"extra_args": args})
    return dev.model_copy(update={"serving": dev.serving.model_copy(update={"engine": engine})})


@pytest.fixture(scope="session")
def larger(tmp_path_factory):
    """The larger-model example stage (docs/larger-model.example.yaml): TP 4 engines on g6.12xlarge nodes."""
    return larger_model(tmp_path_factory.mktemp("larger-model"))
