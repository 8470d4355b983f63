"""Short-lived child programs (go, helm) in a process group of their own, ended whole when the call returns
early for any reason, a signal's Terminated included. subprocess.run kills only the child itself (CPython's
Lib/subprocess.py run(): `except: process.kill()`), not what the child started (go's compile and link, a
Helm plugin), and Popen's own `with` waits for the child to finish (minutes, for a build)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence

from clients.signals import deferred


def start(argv: Sequence[str], **popen) -> subprocess.Popen:
    """The child, started in a new session (its own process group) with stdout and stderr piped, as text. A
    signal while Popen runs is raised once it has returned, and then ends the child: none is left unowned."""
    child = None
    try:
        with deferred():
            child = subprocess.Popen(
                list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen
            )
    except BaseException:
        if child is not None:
            end_group(child)
        raise
    return child


def end_group(child: subprocess.Popen) -> None:
    """SIGKILL to the child's process group (these programs have nothing to save), then reap the child."""
    with deferred():
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        child.communicate()


def run(argv: Sequence[str], *, timeout: float, **popen) -> subprocess.CompletedProcess:
    """subprocess.run(capture_output=True, text=True, check=False)'s result; whatever ends the wait (the
    timeout's TimeoutExpired, a signal) ends the child's whole group first."""
    child = None
    try:
        child = start(argv, **popen)
        stdout, stderr = child.communicate(timeout=timeout)
    except BaseException:
        if child is not None:
            end_group(child)
        raise
    return subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
