"""The child processes of a diff (synths, git, cdk diff), registered while they run, so that a terminating
signal can end them before the temporary folder they write into is removed (their threads then return).

Each child leads a process group of its own (start_new_session), so that its own children (jsii's Node.js
runtime under a synth) are reached too. Ending them: SIGTERM to every group, a bounded wait (jsii's kernel
removes its temporary files on SIGTERM), then SIGKILL to the groups still there (POSIX killpg(3))."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

from .model import DiffError

GRACE_SECONDS = 5.0
_children: set[subprocess.Popen] = set()
# Reentrant: the signal handler that ends the children runs in the main thread, which may hold the lock.
_children_lock = threading.RLock()
_stopping = threading.Event()


def child(argv: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...), with the child registered; none is
    started once a terminating signal has arrived (queued jobs of a thread pool would still start theirs)."""
    # Started and registered under the lock end_children takes: it sees either the flag or the child, never a
    # child started but not yet registered (a test saw that race under load: its child outlived the diff).
    with _children_lock:
        if _stopping.is_set():
            raise DiffError("stopped")
        process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **options
        )
        _children.add(process)
    with process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.communicate()
            raise
        finally:
            with _children_lock:
                _children.discard(process)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except OSError:  # the group is gone already
        pass


def _alive(process: subprocess.Popen) -> bool:
    """Not reaped yet and its group still has a member (no poll(): the thread in communicate() holds the
    wait lock, so poll() would answer None until it returns)."""
    if process.returncode is not None:
        return False
    try:
        os.killpg(process.pid, 0)
    except OSError:
        return False
    return True


def start() -> None:
    """A new diff starts children again (after an earlier one in this process was stopped)."""
    _stopping.clear()


def end_children(grace: float = GRACE_SECONDS) -> None:
    """Start no more children; SIGTERM the running ones' groups, wait up to `grace` s, SIGKILL what is left."""
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for process in running:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in running:
        while _alive(process) and time.monotonic() < deadline:
            time.sleep(0.05)
    for process in running:
        # the leader may have exited while a grandchild (node) lingers in its group: SIGKILL the group anyway
        _signal_group(process, signal.SIGKILL)
