"""The project is one installable CLI: scripts/setup.sh installs it into the venv (editable), which gives
`pd-inference` (the commands of `python -m ops` plus `validate`), and lets scripts/*.py run from anywhere
without touching sys.path. pyproject.toml's dependencies are requirements.txt's, as ranges around its pins."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ops.__main__ import COMMANDS

from .helpers import ROOT

BIN = Path(sys.executable).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _run(*argv: str | Path, cwd: Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False, **options
    )


@pytest.fixture(scope="module")
def console() -> Path:
    script = BIN / "pd-inference"
    if not script.is_file():
        pytest.fail(f"{script} is missing: scripts/setup.sh installs the project (pip install --editable .)")
    return script


def test_the_console_script_is_the_ops_cli_plus_validate(console, tmp_path):
    assert PYPROJECT["project"]["scripts"] == {"pd-inference": "ops.__main__:console"}
    run = _run(console, "--help", cwd=tmp_path)  # outside the checkout: the installed project
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: pd-inference ")
    assert set(COMMANDS) >= {"preflight", "verify", "verify-remote", "diff", "bench", "rehearse", "validate"}
    assert all(name in run.stdout for name in COMMANDS)
    run = _run(console, "verify", "--help", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout.startswith("usage: pd-inference verify ")


def test_validate_is_the_same_through_every_entry_point(console, tmp_path):
    stage = ROOT / "config" / "dev.yaml"
    through_config = _run(sys.executable, "-m", "config", "validate", stage, cwd=ROOT)
    through_ops = _run(sys.executable, "-m", "ops", "validate", stage, cwd=ROOT)
    through_console = _run(console, "validate", stage, cwd=tmp_path)
    assert through_config.returncode == 0, through_config.stderr
    assert through_config.stdout.startswith(f"{stage}: ok: stage dev: ")
    assert (through_ops.returncode, through_ops.stdout) == (0, through_config.stdout)
    assert (through_console.returncode, through_console.stdout) == (0, through_config.stdout)


def test_validate_takes_config_dir_and_json(console, tmp_path):
    run = _run(console, "validate", "--config-dir", ROOT / "config", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["command"] == "validate" and report["ok"] is True
    assert {entry["stage"] for entry in report["stages"]} == {p.stem for p in (ROOT / "config").glob("[!_]*.yaml")}
    missing = tmp_path / "nope.yaml"
    run = _run(console, "validate", missing, "--json", cwd=tmp_path)
    assert (run.returncode, run.stdout) == (2, "")  # a problem: one line on stderr, as without --json
    assert run.stderr.strip().splitlines() == [f"{missing}: (file): no such file (a stage file is config/<stage>.yaml)"]


def test_config_run_as_a_folder_runs_the_installed_checkout_or_says_how_to_run_it(tmp_path):
    stage = ROOT / "config" / "dev.yaml"
    as_folder = _run(sys.executable, ROOT / "config", "validate", stage, cwd=tmp_path)
    assert as_folder.returncode == 0, as_folder.stderr
    assert as_folder.stdout.startswith(f"{stage}: ok: stage dev: ")
    # a copy of the folder is not the checkout this venv has installed: one line, never the other's code
    copy = tmp_path / "elsewhere" / "config"
    shutil.copytree(ROOT / "config", copy, ignore=shutil.ignore_patterns("__pycache__"))
    run = _run(sys.executable, copy, "validate", stage, cwd=tmp_path)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.startswith(f"config: this Python does not have the checkout {copy.parent} installed: ")
    assert len(run.stderr.splitlines()) == 1


def test_no_module_of_the_project_edits_sys_path():
    sources = [
        *(ROOT / "scripts").glob("*.py"),
        *(ROOT / "serving_lab").rglob("*.py"),
        *(ROOT / "config").rglob("*.py"),
        *(ROOT / "ops").rglob("*.py"),
        *(ROOT / "clients").rglob("*.py"),
    ]
    edits = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"sys\.path\.(insert|append)\(", line)
    ]
    assert edits == []


def _pins(requirements: str) -> dict[str, Requirement]:
    pins = {}
    for line in (ROOT / requirements).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            pins.update(_pins(line.split(None, 1)[1]))
        elif line:
            requirement = Requirement(line)
            pins[canonicalize_name(requirement.name)] = requirement
    return pins


def test_the_dependencies_are_the_main_jobs_requirements_as_ranges_around_their_pins():
    pins = _pins("requirements.txt")
    declared = {canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["project"]["dependencies"])}
    assert set(declared) == set(pins)
    for name, requirement in declared.items():
        (pin,) = pins[name].specifier
        assert pin.operator == "==", pins[name]
        assert requirement.specifier.contains(pin.version), f"{requirement} leaves out the pin {pin.version}"
    assert "optional-dependencies" not in PYPROJECT["project"]  # what the CLI needs is all in the main job


def test_the_build_backend_is_pinned():
    (backend,) = PYPROJECT["build-system"]["requires"]
    assert re.fullmatch(r"setuptools==\d+\.\d+\.\d+", backend)
