"""scripts/synth.sh's arguments: every stage named is synthesized, none is the default stage, `all` is every
stage file and stands alone. Run in a copy of the script beside stand-ins of scripts/setup.sh and scripts/cdk
that record their calls (the synth itself: tests/test_app.py, tests/ops/test_stale_synth_output.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.fixture
def checkout(tmp_path) -> Path:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    shutil.copy(ROOT / "scripts" / "synth.sh", scripts / "synth.sh")
    (scripts / "env.sh").write_text("")
    for name in ("setup.sh", "cdk"):
        (scripts / name).write_text(f'#!/usr/bin/env bash\necho "{name} $*" >> "$(dirname "$0")/../calls"\n')
        (scripts / name).chmod(0o755)
    return tmp_path


def _synth(checkout: Path, *argv: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    run = subprocess.run(
        ["bash", str(checkout / "scripts" / "synth.sh"), *argv], capture_output=True, text=True, timeout=30, check=False
    )
    calls = checkout / "calls"
    return run, calls.read_text().splitlines() if calls.exists() else []


def test_every_stage_named_is_synthesized_in_turn(checkout):
    run, calls = _synth(checkout, "dev", "prod")
    assert run.returncode == 0, run.stderr
    assert calls == ["setup.sh ", "cdk synth -c stage=dev dev/*", "cdk synth -c stage=prod prod/*"]


def test_no_stage_is_the_default_stage(checkout):
    assert _synth(checkout)[1] == ["setup.sh ", "cdk synth -c stage=dev dev/*"]


def test_all_synthesizes_every_stage_file_in_one_synth(checkout):
    assert _synth(checkout, "all")[1] == ["setup.sh ", "cdk synth **"]


def test_all_beside_a_stage_name_is_refused_in_one_line_before_the_set_up(checkout):
    run, calls = _synth(checkout, "dev", "all")
    assert (run.returncode, calls, run.stdout) == (2, [], "")
    assert run.stderr == (
        "synth.sh: 'all' already synthesizes every stage: give it alone, or name the stages (got: dev all)\n"
    )
