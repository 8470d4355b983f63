"""clients/signals.py in a process of its own (a signal to pytest's process would end the test run): every
terminating signal becomes Terminated and exit 128+N, a second signal does not cut the first one's cleanup
short, and a signal inside `deferred()` is raised when the block ends, not in the middle of it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

PRELUDE = """
import os, signal, sys, time
from clients.signals import EVERY, Terminated, deferred, terminating
def send(sig):
    os.kill(os.getpid(), sig)
    time.sleep(0.5)  # where a handler that returned lets the code go on
"""


def _run(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGINT])
def test_each_terminating_signal_runs_the_cleanup_and_exits_128_plus_n(signum):
    run = _run(f"""
        try:
            with terminating(signals=EVERY):
                try:
                    send({int(signum)})
                    print("not stopped")
                finally:
                    print("cleaned up")
        except Terminated as exc:
            sys.exit(exc.exit_code)
    """)
    assert run.returncode == 128 + signum, run.stderr
    assert run.stdout.split() == ["cleaned", "up"]


def test_a_second_signal_does_not_cut_the_cleanup_of_the_first_short():
    run = _run("""
        try:
            with terminating(signals=EVERY):
                try:
                    send(signal.SIGTERM)
                finally:
                    send(signal.SIGHUP)  # the operator presses Ctrl-C, or systemd signals again
                    send(signal.SIGINT)
                    print("cleanup finished")
        except Terminated as exc:
            sys.exit(exc.exit_code)
    """)
    assert run.stdout.strip() == "cleanup finished", run.stderr
    assert run.returncode == 143


def test_a_signal_inside_deferred_is_raised_when_the_block_ends():
    run = _run("""
        try:
            with terminating():
                with deferred():
                    send(signal.SIGHUP)
                    print("the block went on")
                print("not reached")
        except Terminated as exc:
            print("raised after it")
            sys.exit(exc.exit_code)
    """)
    assert run.stdout.split("\n")[:2] == ["the block went on", "raised after it"], run.stderr
    assert run.returncode == 129


def test_handlers_are_restored_when_the_block_ends():
    run = _run("""
        with terminating(signals=EVERY):
            pass
        print(signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    """)
    assert run.stdout.strip() == "True True", run.stderr
