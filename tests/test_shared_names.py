"""One home for what several modules must agree on (config/topology.py, config/names.py): no other module
of charts/, stacks/, ops/, clients/ or config/ may repeat a Ray port number or a KubeRay Service-name suffix in its
code (numbers and strings, f-strings included; comments and docstrings may cite them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from config import topology

from .helpers import ROOT

PACKAGES = ("charts", "stacks", "ops", "clients", "config")
HOMES = {Path("config/topology.py"), Path("config/names.py")}
PORTS = (8000, 8265, 6379, 52365, 20000, 22000)
SUFFIXES = ("-serve-svc", "-head-svc")
# A number that happens to equal a port and means something else, with the reason.
NOT_PORTS = {
    ("ops/verify.py", "LOG_LINES"): "the most log lines `ops verify` reads, not a port",
    ("config/loader.py", "MAX_NODES"): "the most YAML nodes a stage file may hold, not a port",
    ("charts/serve_ingress.py", "SERVE_DEFAULT_MAXCONN"): "Serve's HAProxy connection limit, not a port",
}
PORT_TEXT = re.compile(r"(?<![\d.])(" + "|".join(str(port) for port in PORTS) + r")(?![\d.])")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def _assigned_names(tree: ast.AST) -> dict[int, str]:
    """The constant of each `NAME = <constant>` assignment, by node id."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[id(node.value)] = target.id
    return names


def repeated_literals(root: Path = ROOT) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            if rel in HOMES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
            docstrings, assigned = _docstrings(tree), _assigned_names(tree)
            for node in ast.walk(tree):
                if not isinstance(node, ast.Constant) or id(node) in docstrings:
                    continue
                value = node.value
                if isinstance(value, int) and not isinstance(value, bool) and value in PORTS:
                    if (rel.as_posix(), assigned.get(id(node))) in NOT_PORTS:
                        continue
                    found.append(f"{rel}:{node.lineno}: port {value}")
                elif isinstance(value, str):
                    if PORT_TEXT.search(value):
                        found.append(f"{rel}:{node.lineno}: port in {value!r}")
                    found += [f"{rel}:{node.lineno}: {suffix!r} in {value!r}" for suffix in SUFFIXES if suffix in value]
    return found


def test_no_module_repeats_a_port_or_a_service_suffix():
    found = repeated_literals()
    assert not found, "import these from config/topology.py instead:\n" + "\n".join(found)


def test_the_check_finds_a_repeated_port_and_suffix(tmp_path):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "bad.py").write_text('"""Serve on 8000."""\nPORT = 8000\nURL = f"{x}-serve-svc:8265"\n')
    for package in ("charts", "stacks", "clients", "config"):
        (tmp_path / package).mkdir()
    found = repeated_literals(tmp_path)
    assert any("port 8000" in line for line in found), found
    assert any("-serve-svc" in line for line in found), found
    assert any("8265" in line for line in found), found
    assert not any(":1:" in line for line in found), "docstrings may cite ports"


@pytest.mark.parametrize("port", PORTS)
def test_every_checked_port_has_its_home(port):
    homes = {
        topology.GCS_PORT,
        topology.DASHBOARD_PORT,
        topology.SERVE_PORT,
        topology.DASHBOARD_AGENT_PORT,
        *topology.NIXL_PORT_BASE.values(),
    }
    assert port in homes


def test_service_names():
    assert topology.serve_service("pd") == "pd-serve-svc"
    assert topology.head_service("pd") == "pd-head-svc"
    assert topology.serve_address("pd", "inference") == "pd-serve-svc.inference.svc:8000"
