"""One engine alone on its emulated memory budget, before the engines share a GPU: vLLM's own figure for its KV
cache.

Engines starting side by side on one GPU cannot profile their budgets: each counts the other's weights, loading
meanwhile, as its own memory (seen on an H200: "Available KV cache memory: -16.87 GiB"). So `ops rehearse
--share-gpus --emulate-node` without `--kv-cache-bytes` first starts each distinct engine configuration of the
plan alone (`vllm.LLM`, offline, the plan's own engine settings less the KV connector) and reads the line vLLM
prints once it has profiled the budget and captured its graphs (vllm/v1/worker/gpu_worker.py,
`compile_or_warm_up_model`): "Replace gpu_memory_utilization config with `--kv-cache-memory=N` (... GiB) to fit
into requested memory": the budget less the weights, the profile's peak activation, non-torch memory, the CUDA
graphs and 150 MiB spare. N becomes that engine's `kv_cache_memory_bytes`, a recorded override. The same
procedure by hand: evidence/2026-12-01-h200-l4-emulated/emulated_pd.sh (run on an H200, 2026-12-01)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .overrides import Plan, llm_configs
from .ray_cluster import CHECKOUT

FIT_LINE = re.compile(r"--kv-cache-memory=(\d+)` \([0-9.]+ GiB\) to fit into requested memory")
# What an engine alone must not be given: no peer to move KV blocks to (NIXL), and the size being sought.
DROPPED = ("kv_transfer_config", "kv_cache_memory_bytes")
# Starts the engine and exits: the figure is printed during start-up, before any request. engine_alone drops the
# frontend's settings (a real checkpoint's enable_prompt_tokens_details), as Ray Serve LLM does.
ENGINE_ALONE = "serving_lab.rehearse.engine_alone"


class KvProfileError(Exception):
    """One line naming the profile's log; exit code 1 (the host could not start the engine)."""


def engine_args(llm: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `vllm.LLM` for one engine config of the serve config: its engine_kwargs (the names
    of vLLM's EngineArgs, which Ray Serve LLM hands to the engine as they are) and its model folder."""
    kwargs = {key: value for key, value in llm["engine_kwargs"].items() if key not in DROPPED}
    return {"model": llm["model_loading_config"]["model_source"], **kwargs}


def fit_bytes(text: str) -> int | None:
    """vLLM's figure for a KV cache that fits the requested budget, from an engine's start-up log."""
    found = FIT_LINE.search(text)
    return int(found.group(1)) if found else None


def last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if "Error" in line or "error" in line]
    return lines[-1][:200] if lines else "no error line"


def start_alone(
    settings: Mapping[str, Any],
    *,
    log: Path,
    env: Mapping[str, str],
    timeout: float,
    python: str = sys.executable,
    result: Path | None = None,
) -> int | None:
    """`vllm.LLM(**settings)` in a process of its own (ENGINE_ALONE, writing `result` where given), its output in
    `log`: the process's exit code, or None when it did not finish within `timeout`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [python, "-m", ENGINE_ALONE, json.dumps(settings), *([str(result)] if result else [])]
    with log.open("w") as sink:
        try:
            done = subprocess.run(
                command, stdout=sink, stderr=subprocess.STDOUT, env=dict(env), cwd=CHECKOUT,  # -m finds serving_lab
                timeout=timeout, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return None
    return done.returncode


def profile(
    llm: Mapping[str, Any], *, env: Mapping[str, str], log: Path, timeout: float, python: str = sys.executable
) -> int:
    """Start the engine of `llm` alone with `env`, its output in `log`, and return vLLM's fit figure."""
    code = start_alone(engine_args(llm), log=log, env=env, timeout=timeout, python=python)
    if code is None:
        raise KvProfileError(f"{log}: one engine alone did not finish starting within {timeout:g} s")
    text = log.read_text(errors="replace")
    figure = fit_bytes(text)
    if figure is None:
        raise KvProfileError(
            f"{log}: one engine alone printed no '--kv-cache-memory=N ... to fit into requested memory' line "
            f"(exit {code}; {last_error(text)})"
        )
    if figure <= 0:
        raise KvProfileError(
            f"{log}: vLLM's fit figure is {figure:,} bytes: the emulated budget holds no KV cache for these "
            f"engine settings"
        )
    return figure


def size_caches(
    plan: Plan,
    *,
    out: Path,
    timeout: float,
    say: Callable[[str], None],
    python: str = sys.executable,
    environ: Mapping[str, str] = os.environ,
    found: dict[str, int] | None = None,
) -> dict[str, int]:
    """Each engine config of `plan.kv_profiles` -> its KV cache in bytes; engine configs of the same settings are
    profiled once, in this plan and in those that share `found` (the figures by engine settings so far: PD and
    colocated of one rehearsal). Logs: out/kv-profile-<mode>-<config>.log."""
    configs = dict(llm_configs(plan.serve_config))
    found = {} if found is None else found
    figures: dict[str, int] = {}
    for path in plan.kv_profiles:
        llm = configs[path]
        key = json.dumps(engine_args(llm), sort_keys=True)
        if key not in found:
            name = path.rsplit(".", 1)[-1].replace("[", "-").replace("]", "")
            log = out / f"kv-profile-{plan.mode}-{name}.log"
            say(f"sizing the KV cache of {name}: its engine alone on the emulated budget first ({log})")
            env = {**environ, **plan.env, **llm.get("runtime_env", {}).get("env_vars", {})}
            found[key] = profile(llm, env=env, log=log, timeout=timeout, python=python)
            say(f"  {name}: {found[key]:,} bytes (vLLM's fit figure)")
        figures[path] = found[key]
    return figures
