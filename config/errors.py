"""The one error type a stage file can raise, and its one-line form."""

from __future__ import annotations

import datetime
import difflib
import math
import re
import typing
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .secret_shapes import find_secret, redact


class ConfigError(Exception):
    """`PATH: field.path: what is wrong (what is allowed)`: one line, for people and for CI logs."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        # A message may quote what was given (a YAML alias or tag name, a key, a value pydantic refused): a
        # secret-shaped part of it is replaced by what it looks like, whichever code built the message.
        self.path = _printable(redact(str(path)))
        self.field = _printable(redact(field or "(file)"))
        redacted = redact(" ".join(str(problem).split())).split()  # one line; a secret's shape judged whole, first
        self.problem = _printable(" ".join(_bounded(word) for word in redacted))
        super().__init__(f"{self.path}: {self.field}: {self.problem}")


def warning_line(path: str, field: str, problem: str) -> str:
    """`PATH: field.path: warning: what is odd (what to do)`: one line, cleaned as a ConfigError's is. A warning
    never stops a command: the loader prints it on stderr and carries on (config/loader.py load_stage_file)."""
    error = ConfigError(path, field, problem)
    return f"{error.path}: {error.field}: warning: {error.problem}"


WORD_MAX = 1024  # a file path of a message fits (tests run in deep temporary folders); a 10,000-character CIDR does not


def _bounded(word: str) -> str:
    """A word of a message, cut where it is a quoted value no reader needs in full (whichever rule quoted it)."""
    return word if len(word) <= WORD_MAX else f"{word[:40]}... ({len(word) - 40} more characters)"


def _printable(text: str) -> str:
    """Control characters (a terminal escape in a key, say) shown as escapes, never emitted raw."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def short(value: Any, limit: int = 40) -> str:
    """A value for a message: at most about `limit` characters, ASCII, and never the repr of a whole
    structure or of a huge integer (both unbounded; a huge int's repr even raises ValueError)."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        text = repr(value)
    elif isinstance(value, int):
        digits = int(value.bit_length() * 0.30103) + 1
        text = repr(value) if value.bit_length() <= 128 else f"<an integer of about {digits} digits>"
    elif isinstance(value, str):
        # Judged on the whole value around what is shown (a token cut at `limit` no longer has its shape, and
        # its first characters would still be printed); bounded, so a huge value costs no more than a page.
        found = find_secret(value[: limit + 4096])
        if found:
            return f"<a value that looks like {found[0]}, not shown>"
        text = repr(value[: limit + 1])
    elif isinstance(value, dict):
        text = f"<a mapping of {len(value)} keys>"
    elif isinstance(value, (list, tuple)):
        text = f"<a list of {len(value)} items>"
    elif isinstance(value, (datetime.date, datetime.datetime)):  # YAML's timestamps: bounded, no secret
        text = value.isoformat()
    else:
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _keys_at(model: type[BaseModel], loc: tuple) -> list[str]:
    """The keys the model accepts at the parent of `loc` (for 'unknown key' messages)."""
    return sorted(getattr(_model_at(model, loc[:-1]), "model_fields", {}).keys())


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        fields = getattr(current, "model_fields", {})
        if isinstance(part, int) or part not in fields:
            return None
        current = _model_in(fields[part].annotation)
    return current


def _too_large(model: type[BaseModel], loc: tuple, given: Any) -> str:
    """An integer past what pydantic parses (int_parsing_size): its allowed values where the field lists them."""
    field = getattr(_model_at(model, loc[:-1]), "model_fields", {}).get(loc[-1]) if loc else None
    values = typing.get_args(field.annotation) if field and typing.get_origin(field.annotation) is Literal else ()
    allowed = f" (allowed: {', '.join(map(str, values))})" if values else ""
    return f"{short(given)} is far larger than this field takes{allowed}"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def dotted(loc: tuple) -> str:
    """A location as the field path of a message: `serving.engine.max_model_len`, `tags.owner`, `a[0].b`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            out += ("." if out else "") + (text if len(text) <= 64 else text[:61] + "...")
    return out or "(root)"


def _unknown_first(errors: list[ErrorDetails]) -> ErrorDetails:
    """An unknown key hides behind the `missing` error of the key it misspells (`gpu_availabilty_zone`
    makes `gpu_availability_zone` missing): report unknown keys first."""
    for error in errors:
        if error["type"] == "extra_forbidden":
            return error
    return errors[0]


def did_you_mean(given: Any, allowed: list[str]) -> str:
    close = difflib.get_close_matches(str(given)[:100], allowed, n=1, cutoff=0.6)
    return f", did you mean {close[0]}?" if close else ""


# What YAML made of a value where text was wanted: a scalar it typed (quotes cure it), or a collection.
_YAML_SCALARS: dict[type, str] = {type(None): "null", bool: "a boolean", int: "a number", float: "a number"}
_YAML_COLLECTIONS: dict[type, str] = {list: "a list", dict: "a mapping"}


def _literal_problem(given: Any, ctx: dict) -> str:
    """A value outside the allowed ones. When YAML typed it (`kubernetes_version: 1.35` is a number, `None` or an
    empty value null) and the allowed values are text, say so instead of seeming to refuse an allowed value."""
    expected = ctx.get("expected")
    allowed = re.findall(r"'([^']*)'", str(expected or ""))
    if isinstance(given, str) or not allowed:
        return f"{short(given)} is not allowed (allowed: {expected})"
    if type(given) in _YAML_COLLECTIONS:
        return f"YAML read {short(given)} as {_YAML_COLLECTIONS[type(given)]}: write one value (allowed: {expected})"
    kind = _YAML_SCALARS.get(type(given), f"a {type(given).__name__}")  # a date, for 2026-12-05 unquoted
    what = "the value" if given is None else short(given)
    spelled = {"None", "null", "~", ""} if given is None else {str(given), str(given).lower()}
    match = next((value for value in allowed if value in spelled or value.lower() in spelled), None)
    if match is not None:
        return f'YAML read {what} as {kind}, not the text "{match}": quote it (allowed: {expected})'
    return f"YAML read {what} as {kind}, and only text is allowed: quote the value (allowed: {expected})"


# YAML 1.1's unquoted booleans: `namespace: no` is False (the "Norway problem").
_YAML_BOOLEANS = "yes/no, on/off or true/false"  # PyYAML's bool resolver (yaml/resolver.py)


def _typed_where_text(given: Any) -> str:
    """Text was wanted and YAML typed the unquoted value: say what it made of it, and that quotes keep it text."""
    if type(given) in _YAML_COLLECTIONS:
        return f"YAML read {short(given)} as {_YAML_COLLECTIONS[type(given)]}: write one value (allowed: text)"
    if given is None:
        return "no value (an empty value, ~ or null is YAML's null): give one"
    if isinstance(given, bool):
        return f"YAML read an unquoted {_YAML_BOOLEANS} as the boolean {given}, and only text is allowed here: quote it"
    kind = _YAML_SCALARS.get(type(given), f"a {type(given).__name__}")  # a date, for 2026-12-05 unquoted
    return f"YAML read {short(given)} as {kind}, and only text is allowed here: quote the value"


def _number_as_text(given: str, whole: bool) -> str | None:
    """A number written as text: quoted ("64"), or in a form PyYAML's floats do not take (they need a point,
    yaml/resolver.py: 1e-3 and 9e-1 stay text). Say which, and how to write it where a number (a `whole` one for an
    integer field) was wanted."""
    if re.fullmatch(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)", given.strip()):
        return f"{short(given)} is quoted, so YAML reads it as text: write the number without quotes"
    try:
        value = float(given)
    except ValueError:
        return None
    prefix = f"YAML 1.1 reads {short(given)} as text, not a number"
    if not math.isfinite(value):
        return f"{prefix}, and it is beyond a float's range"
    if not whole:
        return f"{prefix}: write it with a point (e.g. {_yaml_float(value)})"
    if value.is_integer():
        return f"{prefix}: write it in decimal digits (e.g. {int(value)})"
    return f"{prefix}: write a whole number in decimal digits"


def _yaml_float(value: float) -> str:
    """`value` as YAML 1.1 reads a float: a point in the digits, a sign on any exponent (1.0e+308)."""
    digits, _, exponent = repr(value).partition("e")
    digits = digits if "." in digits else f"{digits}.0"
    return f"{digits}e{'' if exponent[0] in '+-' else '+'}{exponent}" if exponent else digits


def _type_problem(kind: str, message: str, given: Any) -> str:
    """A value of another type than the field's: where YAML's typing of an unquoted value explains it, how."""
    if kind == "string_type":
        return _typed_where_text(given)
    numeric = kind in ("int_type", "float_type") and isinstance(given, str)
    hint = _number_as_text(given, whole=kind == "int_type") if numeric else None
    if hint:
        return hint
    expected = message.replace("Input should be ", "").replace("a valid ", "")
    return f"expected {expected}, got {type(given).__name__} {short(given)}"


def from_validation_error(path: str, model: type[BaseModel], error: ValidationError) -> ConfigError:
    """The first problem pydantic found (unknown keys first), as one ConfigError; a count of the others
    is appended."""
    errors = error.errors(include_url=False)
    first = _unknown_first(errors)
    loc = tuple(part for part in first["loc"] if part not in ("function-after", "function-before"))
    about_key = bool(loc) and loc[-1] == "[key]"  # a mapping's key failed its own check (tags)
    loc = loc[:-1] if about_key else loc
    kind = first["type"]
    ctx = first.get("ctx") or {}
    given = first.get("input")
    if kind == "extra_forbidden":
        keys = _keys_at(model, loc)
        problem = f"unknown key{did_you_mean(loc[-1], keys) if loc else ''} (allowed: {', '.join(keys)})"
    elif kind == "missing":
        problem = "required key is missing"
    elif kind in ("string_pattern_mismatch",):
        problem = f"{short(given)} does not match the allowed form (pattern {ctx.get('pattern')})"
    elif kind == "literal_error":
        problem = _literal_problem(given, ctx)
    elif kind == "value_error":
        problem = str(ctx.get("error", first["msg"]))
    elif kind.endswith("_type") or kind in ("model_type", "dict_type", "list_type"):
        problem = _type_problem(kind, first["msg"], given)
    elif kind == "int_parsing_size":
        problem = _too_large(model, loc, given)
    else:
        problem = f"{first['msg']} (got {short(given)})"
    if about_key:
        problem = f"the key: {problem}"
    if len(errors) > 1:
        more = len(errors) - 1
        problem += f"; and {more} more problem{'s' if more > 1 else ''} in the file"
    return ConfigError(path, dotted(loc), problem)
