"""Every command-line option of the repository's own entry points brings an allowlist (clients/cli_options.py): read
with ast from every `add_argument` call outside ops' parser (which gives untyped options one: ops/__main__.py
_give_type, tests/ops/test_option_ranges.py). A bare int or float takes `1_000`, `nan` and ` 5 `, a bare Path takes
'' as the current folder, and an untyped string takes '' as a value."""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import ROOT

# Under ops' parser, typed there at run time (ops/__main__.py _give_type): each command's own options. And
# `python -m config validate`, which refuses an empty path itself: config/ imports nothing of clients/.
# And serving_lab/scripts/rehearsal_lock.py, which runs on any Python without the project: find_python checks --python.
UNDER_OPS = ("ops", "serving_lab/bench/cli.py", "serving_lab/rehearse/cli.py", "config/", "serving_lab/scripts/")
BARE = {"int", "float", "str", "Path"}
TAKES_NO_VALUE = {"store_true", "store_false", "count", "help", "version"}


def _sources() -> list[Path]:
    found = []
    for folder in ("scripts", "serving_lab", "localcluster", "config", "clients"):
        found += sorted((ROOT / folder).rglob("*.py"))
    return [path for path in found if not str(path.relative_to(ROOT)).startswith(UNDER_OPS)]


def _untyped(call: ast.Call) -> str | None:
    """Why this add_argument call takes any string, or None."""
    keywords = {k.arg: k.value for k in call.keywords}
    action = keywords.get("action")
    if isinstance(action, ast.Constant) and action.value in TAKES_NO_VALUE or "choices" in keywords:
        return None
    kind = keywords.get("type")
    if kind is None:
        return "no type"
    if isinstance(kind, ast.Name) and kind.id in BARE:
        return f"type={kind.id}"
    return None


def _parsers_of(path: Path, root: Path = ROOT) -> list[str]:
    """Each add_argument call of `path` whose value no allowlist checks, as 'file:line: why'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            why = _untyped(node)
            if why:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {why}")
    return found


def test_every_option_outside_ops_brings_an_allowlist():
    assert [line for path in _sources() for line in _parsers_of(path)] == []


def test_the_scan_finds_a_bare_int_and_an_untyped_string(tmp_path):
    (tmp_path / "x.py").write_text('p.add_argument("--runs", type=int)\np.add_argument("--out")\n')
    assert _parsers_of(tmp_path / "x.py", root=tmp_path) == ["x.py:1: type=int", "x.py:2: no type"]
