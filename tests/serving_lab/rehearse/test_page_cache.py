"""The page cache probe on a real file: mincore's count, fadvise's drop, and one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

from serving_lab.rehearse import page_cache


def test_a_file_just_written_is_resident_and_evict_reports_what_stays(tmp_path):
    path = tmp_path / "model-00001-of-00001.safetensors"
    path.write_bytes(os.urandom(3 * page_cache.PAGE + 5))
    found, pages = page_cache.resident_pages(path)
    assert (found, pages) == (4, 4)
    assert page_cache.resident(tmp_path) == 1.0
    left = page_cache.evict(tmp_path)
    assert left == (1.0 if _filesystem(tmp_path) == "tmpfs" else 0.0)  # tmpfs pages have nowhere to go


def _filesystem(path) -> str:
    """The type of the filesystem holding `path` (the longest mount point above it in /proc/mounts)."""
    best, kind = "", ""
    for line in Path("/proc/mounts").read_text().splitlines():
        _, point, fstype = line.split()[:3]
        if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
            best, kind = point, fstype
    return kind


def test_a_folder_without_weights_is_one_line_exit_1(tmp_path, capsys):
    assert page_cache.main(["resident", str(tmp_path)]) == 1
    assert capsys.readouterr().err == f"page_cache: {tmp_path}: no *.safetensors file\n"


def test_usage_is_exit_2(capsys):
    assert page_cache.main(["drop", "x"]) == 2


def test_a_fifo_named_as_a_weight_file_is_refused_without_opening_it(tmp_path, capsys):
    os.mkfifo(tmp_path / "model.safetensors")
    assert page_cache.main(["evict", str(tmp_path)]) == 1
    assert (
        capsys.readouterr().err
        == f"page_cache: {tmp_path / 'model.safetensors'}: a FIFO (named pipe), not a regular weight file\n"
    )


def test_an_empty_folder_argument_is_not_the_current_folder(capsys):
    assert page_cache.main(["evict", ""]) == 2
    assert capsys.readouterr().err == "page_cache: DIR: '': empty (give a value)\n"
