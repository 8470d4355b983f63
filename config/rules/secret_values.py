"""The rule over the whole parsed file, before the schema reads it: no key or string value that looks like a
secret (config/secret_shapes.py, where errors.py cuts the same shapes out of every message). The refusal names
the field and the kind, never the value."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, dotted
from ..secret_shapes import names_a_secret, secret_kind, secret_like_key

# No string of a stage file is longer than 2,048 characters (the longest field's max_length); one over 64 KiB
# is refused before it is scanned, so the scan's work is bounded by the file (256 KiB) whatever it holds.
MAX_STRING_CHARS = 64 * 1024
# The fields the schema fills with where a secret is kept (config/schema.py SECRET_REF: a Secrets Manager name or
# ARN): a name there is a reference, under any other key that names a secret it is the secret.
REFERENCE_FIELDS = frozenset({"serving.hf_token_secret"})


def refuse_secrets(data: Any, path: str) -> None:
    """Walk the parsed file (bounded: the loader caps its size and its expanded node count) and refuse the first
    string, key or value, that looks like a secret. Iterative: no recursion limit to reach. Each distinct string
    is scanned once (YAML aliases hand the walker one string object many times; the result depends only on the
    text and on whether its key is key-like), and the scan is linear in the string (config/secret_shapes.py)."""
    kinds = _Kinds(path)
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            _refuse_secret_keys(value, where, kinds)
            stack.extend((where + (key,), item) for key, item in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((where + (index,), item) for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            _refuse_secret_string(value, where, kinds)


class _Kinds:
    """The secret kind of each string of one file, each distinct (text, key class) scanned once."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: dict[tuple[str, bool, bool], str | None] = {}

    def of(self, text: str, key: str, where: tuple) -> str | None:
        if len(text) > MAX_STRING_CHARS:
            raise ConfigError(
                self.path,
                dotted(where),
                f"a string of {len(text)} characters (allowed: up to "
                f"{MAX_STRING_CHARS}; no setting of a stage file is that long)",
            )
        reference = dotted(where) in REFERENCE_FIELDS
        # the key's class by its words (config/secret_shapes.py): the result depends on nothing else
        memo = (text, secret_like_key(key), names_a_secret(key) and not reference)
        if memo not in self._seen:
            self._seen[memo] = secret_kind(text, key, reference)
        return self._seen[memo]


def _refuse_secret_keys(mapping: dict, where: tuple, kinds: _Kinds) -> None:
    for key in mapping:
        kind = kinds.of(key, "", where) if isinstance(key, str) else None
        if kind:
            raise ConfigError(
                kinds.path,
                dotted(where),
                f"a key looks like {kind}: a secret value does not "
                "belong in a stage file (not shown; allowed: keep it in AWS Secrets Manager, "
                "and revoke it if this file was shared)",
            )


def _refuse_secret_string(value: str, where: tuple, kinds: _Kinds) -> None:
    key = next((str(part) for part in reversed(where) if not isinstance(part, int)), "")  # a list's items: its key
    kind = kinds.of(value, key, where)
    if kind:
        name = dotted(where)
        allowed = (
            "the name or ARN of the Secrets Manager secret that holds the token"
            if name == "serving.hf_token_secret"
            else "keep secrets in AWS Secrets Manager; serving.hf_token_secret names the token's secret"
        )
        raise ConfigError(
            kinds.path,
            name,
            f"looks like {kind}, a secret value where none belongs (the value is "
            f"not shown; allowed: {allowed}; revoke it if this file was shared)",
        )
