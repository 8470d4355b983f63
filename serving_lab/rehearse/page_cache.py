"""How much of a checkpoint sits in the page cache, and dropping it from there: the cold and warm weight loads.

  python3 -m serving_lab.rehearse.page_cache resident DIR     the fraction of DIR's *.safetensors in memory
  python3 -m serving_lab.rehearse.page_cache evict DIR        drop them (fsync, posix_fadvise DONTNEED), then resident

`resident` maps each file and asks mincore(2) which of its pages are in memory; `evict` asks the kernel to drop a
file's clean pages (posix_fadvise(2) POSIX_FADV_DONTNEED; dirty pages are written first with fsync), which needs no
privilege, unlike /proc/sys/vm/drop_caches. The kernel may keep a page another process has mapped: `evict` prints
what is still resident rather than assuming it went. Linux only.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from clients.cli_options import folder, path_kind

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
PROT_READ, MAP_SHARED = 1, 1
_MAP_FAILED = ctypes.c_void_p(-1).value


class PageCacheError(Exception):
    """One line."""


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    return libc


def resident_pages(path: Path) -> tuple[int, int]:
    """(pages in memory, pages) of one file, from mincore(2) over a read-only shared mapping."""
    size = path.stat().st_size
    pages = -(-size // PAGE)
    if size == 0:
        return 0, 0
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if address in (None, _MAP_FAILED):
            raise PageCacheError(f"{path}: mmap failed: {os.strerror(ctypes.get_errno())}")
        try:
            vector = (ctypes.c_ubyte * pages)()
            if libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                raise PageCacheError(f"{path}: mincore failed: {os.strerror(ctypes.get_errno())}")
            return sum(byte & 1 for byte in vector), pages
        finally:
            libc.munmap(ctypes.c_void_p(address), size)
    finally:
        os.close(fd)


def weight_files(folder: Path) -> list[Path]:
    """The folder's *.safetensors, each a regular file: opening a FIFO named so would wait for a writer."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise PageCacheError(f"{folder}: no *.safetensors file")
    for path in files:
        kind = path_kind(str(path))
        if kind != "a regular file":
            raise PageCacheError(f"{path}: {kind}, not a regular weight file")
    return files


def resident(folder: Path) -> float:
    """The fraction of the folder's weight files in the page cache, 0 to 1."""
    counts = [resident_pages(path) for path in weight_files(folder)]
    total = sum(pages for _, pages in counts)
    return sum(found for found, _ in counts) / total if total else 0.0


def evict(folder: Path) -> float:
    """Drops the weight files' pages from the page cache; returns the fraction still resident."""
    for path in weight_files(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return resident(folder)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("resident", "evict"):
        print("usage: python3 -m serving_lab.rehearse.page_cache resident|evict DIR", file=sys.stderr)
        return 2
    try:
        fraction = (evict if args[0] == "evict" else resident)(Path(folder(args[1])))
    except argparse.ArgumentTypeError as exc:
        print(f"page_cache: DIR: {exc}", file=sys.stderr)
        return 2
    except (PageCacheError, OSError) as exc:
        print(f"page_cache: {exc}", file=sys.stderr)
        return 1
    print(f"page_cache: {args[1]}: {fraction:.1%} of the weight files resident")
    return 0


if __name__ == "__main__":
    sys.exit(main())
