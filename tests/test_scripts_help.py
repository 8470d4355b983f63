"""Every script's --help (and -h) prints its usage and exits 0 without running anything: no installer, no
interpreter, no package manager is called (each is a stand-in on PATH that records a call). The Python
scripts answer --help from any folder: they import the project as installed into the venv (scripts/setup.sh),
never by editing sys.path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

SCRIPT_FOLDERS = (ROOT / "scripts", ROOT / "serving_lab" / "scripts")  # the project's, and the GPU lab's
SCRIPTS = sorted(
    p
    for folder in SCRIPT_FOLDERS
    for p in folder.iterdir()
    if p.is_file() and p.read_text(errors="replace").startswith("#!/usr/bin/env bash") and p.name != "env.sh"
)  # env.sh is sourced, not run
# the Python scripts that take options (argparse); check_vllm_engine_args.py runs on the GPU host, inside the
# rehearsal's own environment (vLLM), and takes none
PYTHON_SCRIPTS = sorted(p for folder in SCRIPT_FOLDERS for p in folder.glob("*.py") if "argparse" in p.read_text())
TOOLS = ("python", "python3", "pip", "npm", "npx", "node", "go", "git", "ray", "rm", "tar", "xz", "kubectl", "aiperf")


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("bin")
    calls = folder / "calls"
    for tool in TOOLS:
        path = folder / tool
        path.write_text(f'#!/bin/sh\necho {tool} "$@" >> {calls}\nexit 97\n')
        path.chmod(0o755)
    return folder, calls


def test_there_are_scripts_to_check():
    assert {"setup.sh", "synth.sh", "test.sh", "bench.sh", "cdk", "rehearsal_pack.sh"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_the_usage_and_runs_nothing(script, flag, stand_ins):
    folder, calls = stand_ins
    calls.unlink(missing_ok=True)
    env = {"PATH": f"{folder}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    result = subprocess.run(
        ["bash", str(script), flag], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30, check=False
    )
    first_comment = script.read_text().splitlines()[1].lstrip("# ").strip()
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines()[0].strip() == first_comment
    assert not calls.exists(), calls.read_text()


@pytest.mark.parametrize("script", PYTHON_SCRIPTS, ids=lambda p: p.name)
def test_every_python_script_answers_help_from_any_folder(script, tmp_path):
    run = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"usage: {script.name} ")


def test_ops_takes_debug_before_or_after_the_subcommand():
    from ops.__main__ import _parser

    for argv in (["--debug", "verify", "--stage", "dev"], ["verify", "--stage", "dev", "--debug"]):
        assert _parser().parse_args(argv).debug is True
    assert _parser().parse_args(["verify", "--stage", "dev"]).debug is False
