"""Each command's documented exit codes (ops/exit_codes.py: the table that ends its --help) are the codes it can
exit with: read with ast from the return sites of the `-> int` functions its module's `run` reaches, plus those
ops/__main__.py's main() returns for every command. A signal's code (130, 128 + signum) counts as 128+N."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest

from ops import exit_codes
from ops.__main__ import COMMANDS, LazyCommand

from ..helpers import ROOT

SIGNALLED = exit_codes.SIGNALLED
# `.exit_code` is Report's (0 or 1) or Terminated's (128 + signum): both read, whichever object it is.
EXIT_CODE_PROPERTIES = (ROOT / "clients" / "report.py", ROOT / "clients" / "signals.py")


def _own_nodes(function: ast.FunctionDef):
    """The nodes of `function`'s body, not those of functions defined inside it."""
    todo: list[ast.AST] = list(function.body)
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.FunctionDef | ast.Lambda)]


class Reader:
    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}

    def returned(self, start: str) -> set[int | str]:
        """The codes the `-> int` functions reachable from `start` return."""
        reached, todo = set(), [start]
        while todo:
            name = todo.pop()
            if name in self.functions and name not in reached:
                reached.add(name)
                calls = [n.func for n in _own_nodes(self.functions[name]) if isinstance(n, ast.Call)]
                todo += [func.id for func in calls if isinstance(func, ast.Name)]
        found: set[int | str] = set()
        for name in reached:
            function = self.functions[name]
            if function.returns is not None and ast.unparse(function.returns) == "int":
                for node in _own_nodes(function):
                    if isinstance(node, ast.Return) and node.value is not None:
                        found |= self.value(node.value, function)
        return found

    def value(self, node: ast.expr, function: ast.FunctionDef) -> set[int | str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return {node.value if node.value < 128 else SIGNALLED}
        if isinstance(node, ast.IfExp):
            return self.value(node.body, function) | self.value(node.orelse, function)
        if isinstance(node, ast.BinOp) and isinstance(node.left, ast.Constant) and node.left.value == 128:
            return {SIGNALLED}
        if isinstance(node, ast.Name):  # `code = ...; return code`: every value assigned to it
            assigned = [
                n.value
                for n in _own_nodes(function)
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)
            ]
            return set().union(*(self.value(value, function) for value in assigned))
        if isinstance(node, ast.Attribute) and node.attr == "exit_code":
            return set().union(*(_property_codes(path, "exit_code") for path in EXIT_CODE_PROPERTIES))
        if isinstance(node, ast.Attribute) and node.attr == "code":
            return self.error_codes()
        if isinstance(node, ast.Call) and (
            isinstance(node.func, ast.Name)
            and node.func.id in self.functions
            or isinstance(node.func, ast.Attribute)
            and node.func.attr == "run"  # main(): the command's own run
        ):
            return set()  # a function of this module: read on its own
        raise AssertionError(f"cannot read the exit code of `{ast.unparse(node)}`: teach this test")

    def error_codes(self) -> set[int | str]:
        """`exc.code` of this module's errors that take one: the default of their `code` parameter, and every
        int given for it where they are raised."""
        found: set[int | str] = set()
        for cls in (n for n in ast.walk(self.tree) if isinstance(n, ast.ClassDef)):
            init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            names = [a.arg for a in init.args.args] if init else []
            if init is None or "code" not in names:
                continue
            index, defaults = names.index("code"), init.args.defaults
            if index >= len(names) - len(defaults):
                found |= self.value(defaults[index - (len(names) - len(defaults))], init)
            position = index - 1  # the argument's place in a call: after self
            for call in (n for n in ast.walk(self.tree) if isinstance(n, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id == cls.name and len(call.args) > position:
                    found |= self.value(call.args[position], init)
        return found


def _property_codes(path: Path, name: str) -> set[int | str]:
    reader = Reader(ast.parse(path.read_text()))
    return reader.returned(name)


def _module(command) -> Path:
    if isinstance(command, LazyCommand):
        name = command.module
    else:
        module = inspect.getmodule(command.run)
        assert module is not None, command
        name = module.__name__
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin)


def _codes_of_main() -> set[int | str]:
    return Reader(ast.parse((ROOT / "ops" / "__main__.py").read_text())).returned("main")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_documented_codes_are_those_the_command_returns(name):
    returned = Reader(ast.parse(_module(COMMANDS[name]).read_text())).returned("run") | _codes_of_main()
    assert set(exit_codes.codes(name)) == returned


def test_main_returns_the_shared_codes():
    assert _codes_of_main() == set(exit_codes.SHARED)


def test_the_reader_finds_a_code_returned_through_a_helper_and_a_variable():
    source = (
        "def run(args) -> int:\n"
        "    if args: return 4\n"
        "    return _rest(args)\n"
        "def _rest(args) -> int:\n"
        "    code = 0 if args else 130\n"
        "    return code\n"
        "def _type(text) -> int:\n"  # not reached from run: an argparse type, say
        "    return 7\n"
    )
    assert Reader(ast.parse(source)).returned("run") == {0, 4, SIGNALLED}


def test_every_command_has_its_codes_and_the_usage_error():
    assert set(exit_codes.EXIT_CODES) == set(COMMANDS)
    assert all("bad arguments" in exit_codes.codes(name)[2] for name in COMMANDS)
