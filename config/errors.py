"""The one error type a stage file can raise, and its one-line form."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError


class ConfigError(Exception):
    """`PATH: field.path: what is wrong (what is allowed)`: one line, for people and for CI logs."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        self.path = _printable(str(path))
        self.field = _printable(field or "(file)")
        self.problem = _printable(" ".join(str(problem).split()))  # never more than one line
        super().__init__(f"{self.path}: {self.field}: {self.problem}")


def _printable(text: str) -> str:
    """Control characters (a terminal escape in a key, say) shown as escapes, never emitted raw."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model accepts at the parent of `loc` (for 'unknown key' messages)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            return []
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return []
        annotation = fields[part].annotation
        current = _model_in(annotation)
    return sorted(getattr(current, "model_fields", {}).keys())


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _dotted(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def from_validation_error(path: str, model: type[BaseModel], error: ValidationError) -> ConfigError:
    """The first problem pydantic found, as one ConfigError; a count of the others is appended."""
    errors = error.errors(include_url=False)
    first = errors[0]
    loc = tuple(part for part in first["loc"] if part not in ("function-after", "function-before"))
    kind = first["type"]
    ctx = first.get("ctx") or {}
    given = first.get("input")
    if kind == "extra_forbidden":
        allowed = ", ".join(_keys_at(model, loc))
        problem = f"unknown key (allowed: {allowed})"
    elif kind == "missing":
        problem = "required key is missing"
    elif kind in ("string_pattern_mismatch",):
        problem = f"{_short(given)} does not match the allowed form (pattern {ctx.get('pattern')})"
    elif kind == "literal_error":
        problem = f"{_short(given)} is not allowed (allowed: {ctx.get('expected')})"
    elif kind == "value_error":
        problem = str(ctx.get("error", first["msg"]))
    elif kind.endswith("_type") or kind in ("model_type", "dict_type", "list_type"):
        expected = first["msg"].replace("Input should be ", "").replace("a valid ", "")
        problem = f"expected {expected}, got {type(given).__name__} {_short(given)}"
    else:
        problem = f"{first['msg']} (got {_short(given)})"
    if len(errors) > 1:
        problem += f" [+{len(errors) - 1} more]"
    return ConfigError(path, _dotted(loc), problem)
