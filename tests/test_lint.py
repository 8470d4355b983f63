"""Lint and types as part of the README's test command: ruff's lint and format checks over the whole
checkout and mypy over the files pyproject.toml's [tool.mypy] names, each with the configuration in
pyproject.toml and the pinned version requirements-dev.txt installs into this venv. Each passes only
when its tool reports nothing; a failure shows the tool's own report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT

# This venv's executables (scripts/setup.sh --dev installs them), not whatever else is on PATH.
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> tuple[int, str]:
    executable = BIN / tool
    if not executable.is_file():
        pytest.fail(f"{executable} is missing: scripts/setup.sh --dev installs it (requirements-dev.txt pins it)")
    # mypy's first run reads the CDK libraries' types (a minute or two); later runs use its cache: the
    # machine's that scripts/test.sh names in MYPY_CACHE_DIR, else the checkout's .mypy_cache/.
    run = subprocess.run([str(executable), *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    return run.returncode, (run.stdout + run.stderr).strip()


def test_ruff_check_finds_nothing():
    returncode, output = _run("ruff", "check", "--quiet", "--output-format", "concise", ".")
    assert (returncode, output) == (0, ""), f"ruff check .:\n{output}"


def test_ruff_format_would_change_nothing():
    returncode, output = _run("ruff", "format", "--check", "--quiet", ".")
    assert (returncode, output) == (0, ""), f"ruff format --check . (ruff format . rewrites them):\n{output}"


def test_mypy_finds_nothing():
    returncode, output = _run("mypy")
    lines = output.splitlines()
    assert returncode == 0 and len(lines) == 1 and lines[0].startswith("Success: "), f"mypy:\n{output}"
