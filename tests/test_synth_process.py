"""The synth process's start and end (synth_process.py): the exit still runs exit handlers and flushes
output, the collector is back on after the imports, and the caller's environment wins."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import synth_process

from .helpers import ROOT


def test_exit_now_runs_exit_handlers_flushes_output_and_keeps_the_code(tmp_path):
    marker = tmp_path / "handler-ran"
    script = textwrap.dedent(f"""
        import atexit, sys
        import synth_process
        atexit.register(lambda: open({str(marker)!r}, "w").write("yes"))
        sys.stdout.write("buffered line, no newline")
        synth_process.exit_now(3)
    """)
    # `python -c` puts its working directory first on sys.path: the checkout's synth_process, in a bare
    # environment (no PYTHONPATH), wherever pytest runs from
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 3
    assert proc.stdout == "buffered line, no newline"
    assert marker.read_text() == "yes"


def test_collector_is_back_on_after_the_imports():
    assert gc.isenabled()
    with synth_process.imports_without_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.unfreeze()


def test_collector_stays_off_if_it_was_off():
    gc.disable()
    try:
        with synth_process.imports_without_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_environment_set_by_the_caller_wins(monkeypatch):
    monkeypatch.setenv("NODE_OPTIONS", "--max-old-space-size=4096")
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "logfire")
    synth_process.configure_environment()
    assert os.environ["NODE_OPTIONS"] == "--max-old-space-size=4096 --max-semi-space-size=64"
    assert os.environ["PYDANTIC_DISABLE_PLUGINS"] == "logfire"
