"""clients/files.py: a named input file is read only where it is a regular file, within its size cap; anything
else is one reason in words, and nothing blocks."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from clients.files import FileRefused, read_regular


def _fifo(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "pipe")
    return tmp_path / "pipe"


def _loop(tmp_path: Path) -> Path:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    return tmp_path / "a"


def _socket(tmp_path: Path) -> Path:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s"))
    return tmp_path / "s"


@pytest.mark.parametrize(
    "make, reason",
    [
        (_fifo, "a FIFO (named pipe), not a regular file"),
        (lambda tmp_path: tmp_path, "a folder, not a regular file"),
        (lambda tmp_path: Path("/dev/zero"), "a character device, not a regular file"),
        (lambda tmp_path: tmp_path / "nope", "no such file"),
        (_loop, "a symbolic link loop, not a regular file"),
        (_socket, "not a regular file (a socket?)"),
    ],
    ids=["fifo", "folder", "dev-zero", "missing", "link-loop", "socket"],
)
def test_what_is_not_a_regular_file_is_refused_by_its_kind(tmp_path, make, reason):
    with pytest.raises(FileRefused) as info:
        read_regular(make(tmp_path), 1024)
    assert str(info.value) == reason


def test_a_regular_file_within_the_cap_is_read_whole(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 1024)
    assert read_regular(tmp_path / "f", 1024) == b"x" * 1024


def test_a_file_over_the_cap_is_refused_by_its_size(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 1025)
    with pytest.raises(FileRefused, match=r"^larger than 1024 bytes$"):
        read_regular(tmp_path / "f", 1024)


def test_a_size_stat_does_not_know_is_counted_while_reading():
    assert os.stat("/proc/self/environ").st_size == 0
    with pytest.raises(FileRefused, match=r"^larger than 2 bytes$"):
        read_regular(Path("/proc/self/environ"), 2)
