"""The layers of the repository's own packages, read from the source with ast: every import (module-level and
function-local, and a module's dotted name in a string, as importlib.import_module takes it) is an edge. No cycle between top-level packages, no
module-level cycle between modules, and what synth runs (config/, charts/, stacks/, app.py) imports none of
the operator's commands or the labs (docs/DECISIONS.md, "Layers")."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests")
SYNTH_SIDE = ("app", "config", "charts", "stacks")
NOT_FROM_SYNTH = ("ops", "serving_lab", "localcluster")
# The bottom layer: libraries that know no stage file; what is stage-aware hands them plain values.
CLIENTS_IMPORT_NONE = ("config", "charts", "stacks", "ops", "serving_lab", "localcluster")


def _modules() -> dict[str, Path]:
    found = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The longest known module that `name` (a dotted import target) starts with."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in MODULES:
            return ".".join(parts[:end])
    return None


def _base(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return ".".join(p for p in (package, node.module) if p)


def _targets(module: str, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = _base(module, node)
        return [f"{base}.{alias.name}" if _resolve(f"{base}.{alias.name}") else base for alias in node.names]
    # importlib.import_module's argument, or a module named for a lazy import (ops/__main__.py LazyCommand):
    # any string that is the dotted name of one of the repository's modules.
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
        return [node.value] if node.value in MODULES else []
    return []


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _edges(module: str, tree: ast.AST, module_level: bool) -> set[str]:
    """The known modules `module` imports: at module level only (what importing it runs), or anywhere."""
    found: set[str] = set()
    nodes = [tree]
    while nodes:
        node = nodes.pop()
        for target in _targets(module, node):
            resolved = _resolve(target)
            if resolved and resolved != module:
                found.add(resolved)
        for child in ast.iter_child_nodes(node):
            runs_later = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) or _type_checking(child)
            if not (module_level and runs_later):
                nodes.append(child)
    return found


def _graph(module_level: bool) -> dict[str, set[str]]:
    return {
        module: _edges(module, ast.parse(path.read_text(encoding="utf-8")), module_level)
        for module, path in MODULES.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    tarjan = _Tarjan(graph)
    for start in sorted(graph):
        if start not in tarjan.index:
            tarjan.visit(start)
    return tarjan.found


class _Tarjan:
    """Tarjan's walk, its explicit stack in place of recursion: no recursion limit to reach."""

    def __init__(self, graph: dict[str, set[str]]) -> None:
        self.graph = graph
        self.index: dict[str, int] = {}
        self.low: dict[str, int] = {}
        self.stack: list[str] = []
        self.on_stack: set[str] = set()
        self.found: list[list[str]] = []

    def visit(self, start: str) -> None:
        work: list[tuple[str, Iterator[str]]] = []
        self._enter(start, work)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    self.low[work[-1][0]] = min(self.low[work[-1][0]], self.low[node])
                if self.low[node] == self.index[node]:
                    self._pop_component(node)
            elif child not in self.index:
                self._enter(child, work)
            elif child in self.on_stack:
                self.low[node] = min(self.low[node], self.index[child])

    def _enter(self, node: str, work: list[tuple[str, Iterator[str]]]) -> None:
        self.index[node] = self.low[node] = len(self.index)
        self.stack.append(node)
        self.on_stack.add(node)
        work.append((node, iter(sorted(self.graph.get(node, ())))))

    def _pop_component(self, node: str) -> None:
        component = []
        while True:
            top = self.stack.pop()
            self.on_stack.discard(top)
            component.append(top)
            if top == node:
                break
        if len(component) > 1:
            self.found.append(sorted(component))


def _top(module: str) -> str:
    return module.partition(".")[0]


def package_graph() -> dict[str, set[str]]:
    """Top-level package -> the top-level packages it imports (any import, anywhere)."""
    graph: dict[str, set[str]] = {}
    for module, targets in _graph(module_level=False).items():
        graph.setdefault(_top(module), set()).update(_top(t) for t in targets if _top(t) != _top(module))
    return graph


def test_no_cycle_between_top_level_packages():
    assert _cycles(package_graph()) == []


def test_no_module_level_import_cycle():
    graph = _graph(module_level=True)
    for module, targets in graph.items():
        # config/'s own cycles are being removed on their own branch (config-cycles); until then, not here.
        graph[module] = {t for t in targets if not (_top(module) == _top(t) == "config")}
    assert _cycles(graph) == []


def test_synth_side_imports_no_command_or_lab():
    wrong = {
        f"{module} -> {target}"
        for module, targets in _graph(module_level=False).items()
        if _top(module) in SYNTH_SIDE
        for target in targets
        if _top(target) in NOT_FROM_SYNTH
    }
    assert sorted(wrong) == []


def test_clients_import_no_other_package_of_the_repository():
    assert sorted(package_graph()["clients"] & set(CLIENTS_IMPORT_NONE)) == []


if __name__ == "__main__":
    for package, imports in sorted(package_graph().items()):
        print(f"{package} -> {', '.join(sorted(imports)) or '(none)'}")
