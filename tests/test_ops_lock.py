"""requirements-ops.lock, what the verify runner and the pipeline's verify steps install with pip's
--require-hashes (config/topology.py install_ops_command): every package of requirements-ops.txt and every
dependency they have (as this venv resolved them, markers evaluated), each at constraints.txt's pin and with
a sha256 of its wheel. scripts/lock_ops.sh writes it; this fails when it is stale."""

from __future__ import annotations

import re
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from config.topology import VERIFY_LOCK, install_ops_command

from .helpers import ROOT

ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+) \\\n    --hash=sha256:[0-9a-f]{64}$", re.MULTILINE)


def _pins(path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _locked() -> dict[str, str]:
    text = (ROOT / VERIFY_LOCK).read_text()
    entries: dict[str, str] = {canonicalize_name(m["name"]): m["version"] for m in ENTRY.finditer(text)}
    # every requirement line of the file is one hashed entry (nothing unhashed slips in)
    assert len(entries) == len([line for line in text.splitlines() if "==" in line])
    return entries


def _closure(names: set[str]) -> set[str]:
    """The names and their dependencies, as installed here (markers evaluated, extras not taken)."""
    seen: set[str] = set()
    todo = list(names)
    env: dict[str, str] = {key: str(value) for key, value in default_environment().items()} | {"extra": ""}
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for spec in metadata.requires(name) or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate(env):
                todo.append(requirement.name)
    return seen


def test_the_lock_holds_every_package_ops_needs_at_the_constraints_pins():
    locked = _locked()
    constraints = _pins(ROOT / "constraints.txt")
    wanted = set(_pins(ROOT / "requirements-ops.txt"))
    assert set(locked) == _closure(wanted), "stale: run scripts/lock_ops.sh"
    assert {name: constraints.get(name) for name in locked} == locked, "stale: run scripts/lock_ops.sh"


def test_the_runner_installs_only_hashed_wheels_from_the_lock():
    command = install_ops_command("/tmp/ops")
    assert command == "/tmp/ops/bin/pip install --quiet --require-hashes --only-binary=:all: -r requirements-ops.lock"
