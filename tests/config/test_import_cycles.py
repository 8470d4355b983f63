"""No import cycle inside the config package, counting function-local and TYPE_CHECKING imports: the tables
(engine_args, engine_arg_classes, regions, instance_types) import no rule, and the rules (config/rules/) import
the tables and the schema, never the other way round."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((ROOT / "config").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1] + [node.module or ""]).strip(".")
            base = base if node.level else node.module or ""
            targets.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {target for target in targets if target in modules and target != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(name: str, path: list[str]) -> list[str] | None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target, [*path, target])):
                return found
        state[name] = 2
        return None

    return next((c for name in sorted(graph) if name not in state and (c := visit(name, [name]))), None)


def test_config_has_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "config.rules.serving_roles" in graph and "config.engine_args" in graph["config.schema"]
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
