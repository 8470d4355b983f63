"""A script run by a python3 that is not the project's venv (no pydantic, no project packages) says so in one
line with the fix, exit 2, never a traceback. `python -S` stands for that interpreter: no site-packages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

SCRIPTS = ["scripts/stage_reference.py"]


@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize("args", [[], ["--check"]])
def test_without_the_venv_it_names_the_venv_in_one_line(script, args, tmp_path):
    run = subprocess.run(
        [sys.executable, "-S", str(ROOT / script), *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"{script.rsplit('/', 1)[-1]}: no module 'pydantic' in {sys.executable}: ")
    assert line.endswith(
        "run it with the project's venv, .venv/bin/python scripts/stage_reference.py (scripts/setup.sh makes .venv)"
    )
