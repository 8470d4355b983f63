"""SIGTERM and SIGHUP as an exception in the main thread, so that every `finally` and `except BaseException`
cleanup runs (the default handlers end the process without them) and the command exits 128 + the signal."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

HANDLED = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """A signal arrived; `exit_code` is 128 + its number. A BaseException, like KeyboardInterrupt, so that a
    handler for Exception does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextmanager
def terminating(before: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP raise Terminated (after `before`, e.g. ending child processes). Outside the
    main thread nothing is installed (Python delivers signals to the main thread only)."""

    def _raise(signum, frame) -> None:
        before()
        raise Terminated(signum)

    handled = HANDLED if threading.current_thread() is threading.main_thread() else ()
    previous = {sig: signal.signal(sig, _raise) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
