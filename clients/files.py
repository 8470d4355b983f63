"""Input files a user names, or that a named folder holds: read only where they are regular files, and at most a
stated size. A FIFO blocks its reader until a writer comes, /dev/zero never ends, and a file can be swapped for
either after a check, so the kind is taken from the open file itself."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class FileRefused(Exception):
    """Why a file was not read, in words that follow its name: 'a FIFO (named pipe), not a regular file'."""


def kind_of(mode: int) -> str:
    """What an st_mode that is not a regular file's names, in words (the one vocabulary of clients/)."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them (counted as read: /proc's sizes are 0);
    FileRefused otherwise."""
    fd = _open(path)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise FileRefused(_too_large(limit))
        return _read_at_most(fd, limit)
    except OSError as exc:
        raise FileRefused(f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _too_large(limit: int) -> str:
    return f"larger than {limit // 2**20} MiB" if limit >= 2**20 else f"larger than {limit} bytes"


def _open(path: Path) -> int:
    # O_NONBLOCK: opening a FIFO with no writer returns at once (a blocking open would wait for one forever);
    # fstat on the open file then refuses it.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise FileRefused("no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused("a symbolic link loop, not a regular file") from None
        if exc.errno == errno.ENXIO:  # a socket (or a device without a driver): nothing to read
            raise FileRefused("not a regular file (a socket?)") from None
        raise FileRefused(f"cannot be opened ({exc.strerror or exc})") from None


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, min(1 << 20, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise FileRefused(_too_large(limit))
    return b"".join(chunks)
