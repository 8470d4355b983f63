"""Terminating signals as an exception in the main thread, so that every `finally` and `except BaseException`
cleanup runs (the default handlers end the process without them: SIGTERM and SIGHUP kill it, SIGQUIT dumps
core) and the command exits 128 + the signal.

Two rules make the cleanup itself safe from signals:
- once one signal has raised Terminated, later ones are ignored until `terminating` ends: a second SIGTERM
  (or a Ctrl-C after a SIGHUP) must not break off the cleanup the first one started, half-way through
  ending the child processes;
- inside `deferred()` a signal is only noted, and raised when the block ends: for steps that must not be cut
  in two (a child started but not yet recorded, a folder half removed).

CPython runs a Python signal handler in the main thread between two bytecodes, never inside a C call such as
fork (docs.python.org/3/library/signal.html, "Execution of Python signal handlers"): so a noted signal is
raised at the latest when the deferred block ends."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HANDLED = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# With Ctrl-C too, for a command whose cleanup a second Ctrl-C must not break off (local-cluster).
EVERY = (signal.SIGINT, *HANDLED)


class Terminated(BaseException):
    """A signal arrived; `exit_code` is 128 + its number. A BaseException, like KeyboardInterrupt, so that a
    handler for Exception does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    """Of the one `terminating` block in force (signals reach the main thread only, so one at a time)."""

    def __init__(self, before: Callable[[], None] = lambda: None) -> None:
        self.before = before  # what runs before Terminated is raised
        self.depth = 0  # deferred() blocks open
        self.pending: int | None = None  # a signal noted inside one
        self.fired = False  # Terminated raised already: later signals are ignored


_state = _State()


def _fire(signum: int) -> None:
    _state.fired = True
    _state.before()
    raise Terminated(signum)


@contextmanager
def terminating(before: Callable[[], None] = lambda: None, signals: tuple = HANDLED) -> Iterator[None]:
    """Inside: each of `signals` raises Terminated (after `before`, e.g. ending child processes), once; see
    the module's rules. Outside the main thread nothing is installed (Python delivers signals to it only)."""
    global _state

    def _handle(signum, frame) -> None:
        if _state.fired:
            return
        if _state.depth:
            _state.pending = _state.pending or signum
            return
        _fire(signum)

    handled = signals if threading.current_thread() is threading.main_thread() else ()
    outer, _state = _state, _State(before)
    previous = {sig: signal.signal(sig, _handle) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state = outer


@contextmanager
def deferred() -> Iterator[None]:
    """A block no signal cuts in two: one that arrives meanwhile raises Terminated when the block ends (even
    if the block raised something else: the signal says why the command stops)."""
    _state.depth += 1
    try:
        yield
    finally:
        _state.depth -= 1
        pending = _state.pending
        if not _state.depth and pending is not None and not _state.fired:
            _state.pending = None
            _fire(pending)
