"""The CloudWatch Logs filter patterns of the NIXL alarm, and an evaluator of exactly the syntax they use.

Subset (CloudWatch Logs "matching terms in unstructured log events"): a pattern is terms separated by
spaces; a term is a double-quoted phrase ("Backend UCX was instantiated") or a bare word of letters,
digits and underscores; a term prefixed with `-` must NOT occur. An event matches when every plain term
occurs in it and no excluded term does. Occurrence is a case-sensitive substring test on the whole
event text (for a Container Insights application log event, the JSON document Fluent Bit writes with the
container's line in its `log` field). No `?` (OR), no JSON or space-delimited patterns, no regex: the
evaluator refuses them, so a pattern outside the subset cannot be tested as if it were inside.
"""

from __future__ import annotations

import re

# libfabric picked a provider other than efa (NIXL prints `Created <N> rails using provider=<p>`).
NON_EFA_PROVIDER = '"rails using provider=" -"provider=efa"'
# NIXL's UCX backend: on EFA it runs at TCP speed. Quoted as a phrase: the bare word UCX also occurs in
# healthy lines ("Setting UCX_RCACHE_MAX_UNRELEASED ...", "Discovered backend plugin: UCX").
UCX_BACKEND = '"Backend UCX was instantiated"'
NIXL_NOT_ON_EFA = {"NonEfaProvider": NON_EFA_PROVIDER, "UcxBackend": UCX_BACKEND}

_TERM = re.compile(r'(-?)(?:"([^"]+)"|([A-Za-z0-9_]+))(?:\s+|\Z)')


def parse(pattern: str) -> list[tuple[bool, str]]:
    """(excluded, text) per term; ValueError for anything outside the subset."""
    terms, position, text = [], 0, pattern.strip()
    while position < len(text):
        match = _TERM.match(text, position)
        if not match:
            raise ValueError(f"outside the supported subset at {text[position:]!r} (pattern {pattern!r})")
        terms.append((match.group(1) == "-", match.group(2) or match.group(3)))
        position = match.end()
    if not terms or all(excluded for excluded, _ in terms):
        raise ValueError(f"{pattern!r} has no term that must occur")
    return terms


def matches(pattern: str, event: str) -> bool:
    return all((term in event) != excluded for excluded, term in parse(pattern))
