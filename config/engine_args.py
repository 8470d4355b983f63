"""vLLM's own engine arguments, as recorded from the pinned vLLM (config/vllm_engine_args.json, made by
scripts/record_vllm_engine_args.py): what `serving.engine.extra_args` may name, and which Python type
each value must have. `ops rehearse` checks the record against the real EngineArgs on a GPU host."""

from __future__ import annotations

import ast
import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any

from .engine_arg_classes import ENGINE_ARG_VALUES, FREE_STRINGS, engine_arg_class
from .engine_arg_ranges import range_problem

RECORD = Path(__file__).with_name("vllm_engine_args.json")
# Which fields extra_args may set, and the check each allowed one gets: config/engine_arg_classes.py.
# Hopper GPUs, on which the pinned vLLM lacks FlashInfer's GDN prefill kernel for Gated DeltaNet models
# (seen on an H200: docs/REHEARSAL.md, the gdn_prefill_backend override).
# Why: docs/DECISIONS.md, "Engine arguments by what they mean".
SM90_GPUS = frozenset({"H100", "H200"})
# Keyed like config/derived.py KNOWN_MODELS, by model_key(): the repo's name in lower case, so a fine-tune or
# quantized copy under another organisation ("someone/Qwen3.5-9B-AWQ", the same architecture) and any
# spelling the Hub resolves ("qwen/qwen3.5-9b") are found too.
GDN_MODEL_PREFIXES = ("qwen3.5-", "qwen3-next-")


def model_key(source: str) -> str:
    """How the app looks a model up (KNOWN_MODELS, the GDN models): the name after the organisation, in lower
    case. Hugging Face repo ids are case-insensitive on the Hub ("repo ids are case insensitive across the Hub",
    huggingface/huggingface_hub#2090, a maintainer): `qwen/qwen3.5-9b` downloads Qwen/Qwen3.5-9B, so a
    case-sensitive lookup would miss the very model it guards."""
    return source.rstrip("/").rsplit("/", 1)[-1].lower()


def is_gdn_model(source: str) -> bool:
    return model_key(source).startswith(GDN_MODEL_PREFIXES)


@functools.lru_cache(maxsize=1)
def recorded() -> dict[str, str]:
    return json.loads(RECORD.read_text())["fields"]


def _parts(annotation: str) -> tuple[set[type], list[Any]] | None:
    """({plain Python types}, [literal choices]) of a simple annotation such as `int | None` or
    `Literal['a', 'b'] | None`; None when it is a structure (a dict, a config object) that one scalar
    of a stage file cannot set."""
    plain: set[type] = set()
    choices: list[Any] = []
    for part in (p.strip() for p in re.split(r"\|(?![^\[]*\])", annotation)):
        literal = re.fullmatch(r"Literal\[(.*)\]", part)
        if literal:
            choices += [ast.literal_eval(item) for item in re.findall(r"'[^']*'|\"[^\"]*\"|-?\d+", literal.group(1))]
        elif part in _PLAIN:
            plain.add(_PLAIN[part])
        elif part != "None":
            return None
    return (plain, choices) if plain or choices else None


_PLAIN = {"int": int, "float": float, "bool": bool, "str": str}


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return kind is bool
    if isinstance(value, int):
        return kind in (int, float)
    return isinstance(value, kind) and kind is not bool


def check_extra(name: str, value: Any) -> str | None:
    """None when vLLM's EngineArgs takes `name` with this value and the stage may pass it, else what is wrong
    (one line). An opt-in argument passes here; config/rules/serving_engine.py `unsafe_engine_args` asks for its
    opt-in."""
    fields = recorded()
    if name not in fields:
        close = difflib.get_close_matches(name, list(fields), n=3)
        return f"{name!r} is not an engine argument of vLLM" + (f" (did you mean {', '.join(close)}?)" if close else "")
    kind, why = engine_arg_class(name)
    if kind in ("reserved", "unclassified"):
        return f"{name} is reserved: {why} (allowed: serving.engine's own fields, and the engine arguments that tune)"
    if name in ENGINE_ARG_VALUES:
        values, what = ENGINE_ARG_VALUES[name]
        if isinstance(value, str) and value in values:
            return None
        return f"{name}: {value!r} (allowed: {', '.join(map(repr, values))}: {what})"
    parts = _parts(fields[name])
    if parts is None:
        return f"{name} takes a {fields[name]}, not a single value a stage file can set"
    plain, choices = parts
    if name not in FREE_STRINGS:
        plain = plain - {str}  # a free string names a registration or a path: only ENGINE_ARG_VALUES' names
    if any(_is(value, kind) for kind in plain):
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return range_problem(name, value) if numeric else None
    if value in choices and not isinstance(value, bool):
        return None
    allowed = fields[name] if not choices else ", ".join(map(repr, choices))
    return f"{name}: {value!r} (allowed: {allowed})"
