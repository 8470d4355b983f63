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
from typing import Any, Optional

RECORD = Path(__file__).with_name("vllm_engine_args.json")
# Set by the project from typed fields or by the serve config itself: never through extra_args.
RESERVED = frozenset({"model", "served_model_name", "kv_transfer_config", "max_model_len", "dtype",
                      "gpu_memory_utilization", "enforce_eager", "tensor_parallel_size", "max_num_seqs",
                      "max_num_batched_tokens", "enable_prefix_caching", "gdn_prefill_backend", "load_format",
                      "tokenizer", "download_dir", "distributed_executor_backend"})
# The GPUs of compute capability 9.x (Hopper), and the models with Gated DeltaNet layers, on which
# FlashInfer's GDN prefill kernel is missing in the pinned vLLM ("SM90 GDN prefill DSL kernel is
# unavailable" from vllm/model_executor/.../qwen_gdn_linear_attn.py, seen on an H200: docs/REHEARSAL.md,
# the gdn_prefill_backend override; this project's H200 run used the Triton kernel throughout).
SM90_GPUS = frozenset({"H100", "H200"})
GDN_MODEL_PREFIXES = ("Qwen/Qwen3.5-", "Qwen/Qwen3-Next-")


def is_gdn_model(source: str) -> bool:
    return source.startswith(GDN_MODEL_PREFIXES)


@functools.lru_cache(maxsize=1)
def recorded() -> dict[str, str]:
    return json.loads(RECORD.read_text())["fields"]


def _parts(annotation: str) -> Optional[tuple[set[type], list[Any]]]:
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


def check_extra(name: str, value: Any) -> Optional[str]:
    """None when vLLM's EngineArgs takes `name` with this value, else what is wrong (one line)."""
    fields = recorded()
    if name in RESERVED:
        return f"{name} is set by the project (use its own field, or it is not for stage files)"
    if name not in fields:
        close = difflib.get_close_matches(name, list(fields), n=3)
        return f"{name!r} is not an engine argument of vLLM" + (f" (did you mean {', '.join(close)}?)" if close else "")
    parts = _parts(fields[name])
    if parts is None:
        return f"{name} takes a {fields[name]}, not a single value a stage file can set"
    plain, choices = parts
    if any(_is(value, kind) for kind in plain) or (value in choices and not isinstance(value, bool)):
        return None
    allowed = fields[name] if not choices else ", ".join(map(repr, choices))
    return f"{name}: {value!r} (allowed: {allowed})"
