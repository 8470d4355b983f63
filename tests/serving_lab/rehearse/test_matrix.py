"""Issue #53's settings matrix (serving_lab/rehearse/matrix.py), read from committed rehearsal evidence: the figures
it prints are the ones the evidence README states, and a folder that holds no rehearsal is one line, exit 2."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from serving_lab.rehearse import matrix

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-02-h200-pd-vs-colocated" / "runs"


@pytest.fixture(scope="module")
def arms(tmp_path_factory) -> dict[str, Path]:
    """The PD and colocated rehearsals of 2026-12-02 (README.md there: the table "streams | PD TTFT p50 | ...")."""
    found = {}
    for name in ("pd2", "col1"):
        folder = tmp_path_factory.mktemp(name)
        with tarfile.open(EVIDENCE / f"{name}.tgz") as tar:
            tar.extractall(folder, filter="data")
        found[name] = folder / "dev"
    return found


def test_the_rows_are_the_figures_the_evidence_states(arms, capsys):
    assert matrix.main([f"pd={arms['pd2']}", f"col={arms['col1']}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "profile chat"
    assert lines[3] == (
        "| pd | pd | 486,679 | 206 | 165.2 / 6.60, 0.53 [0.53-0.53] of 16 | 195.5 / 7.05, 1.95 [1.95-1.95] of 60 "
        "| 369.1 / 8.30, 6.23 [6.23-6.23] of 128 |"
    )
    assert lines[4].startswith("| col | colocated | 486,679 | 303 | 117.3 / 6.22, 0.57")


def test_a_profile_the_runs_lack_leaves_the_levels_out(arms, capsys):
    assert matrix.main(["--profile", "long-prompt", f"pd={arms['pd2']}"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "| arm | mode | KV tokens/engine | RUNNING s |"


def test_a_folder_without_a_rehearsal_is_one_line_and_exit_2(tmp_path, capsys):
    assert matrix.main([f"x={tmp_path}"]) == 2
    assert (
        capsys.readouterr().err == f"matrix: {tmp_path}: no report-<mode>.json (a rehearsal's <out>/<stage>/ folder)\n"
    )


@pytest.mark.parametrize("body", ["[1, 2]", '{"checks": 5}', "{", "[" * 100_000])
def test_a_report_that_is_not_one_is_one_line_and_exit_2(tmp_path, capsys, body):
    (tmp_path / "report-pd.json").write_text(body)
    assert matrix.main([f"x={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"matrix: {tmp_path / 'report-pd.json'}: not a rehearsal report (") and err.count("\n") == 1


@pytest.mark.parametrize("make", [os.mkfifo, lambda path: path.symlink_to("/dev/zero")], ids=["fifo", "dev-zero"])
def test_a_report_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, capsys, make):
    make(tmp_path / "report-pd.json")
    assert matrix.main([f"x={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"matrix: {tmp_path / 'report-pd.json'}: a ") and err.endswith(
        ", not a regular file: not a rehearsal report\n"
    )


@pytest.mark.parametrize("arm", ["nofolder", "../x=/tmp", "x=/nonexistent"])
def test_an_arm_is_a_label_and_a_folder(arm, capsys):
    with pytest.raises(SystemExit) as info:
        matrix.main([arm])
    assert info.value.code == 2
    assert "error: argument NAME=FOLDER: " in capsys.readouterr().err
