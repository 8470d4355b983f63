"""The child processes of a diff (synths, git, cdk diff), registered while they run, so that SIGTERM can
end them before the temporary folder they write into is removed (their threads then return at once)."""

from __future__ import annotations

import subprocess
import threading

from .model import DiffError

_children: set[subprocess.Popen] = set()
_children_lock = threading.Lock()
_stopping = threading.Event()


def child(argv: list[str], *, timeout: float, **options) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...), with the child registered; none is
    started once SIGTERM has arrived (queued jobs of a thread pool would otherwise still start theirs)."""
    if _stopping.is_set():
        raise DiffError("stopped")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options) as process:
        with _children_lock:
            _children.add(process)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise
        finally:
            with _children_lock:
                _children.discard(process)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def start() -> None:
    """A new diff starts children again (after an earlier one in this process was stopped)."""
    _stopping.clear()


def end_children() -> None:
    """Start no more children, and kill the ones running now."""
    _stopping.set()
    with _children_lock:
        running = list(_children)
    for process in running:
        try:
            process.kill()
        except OSError:
            pass
