"""TCPStore port windows for engines side by side on one host, and the Ray worker hook that hands one to each
replica of an engine config.

vLLM 0.26's Ray executor takes its torch.distributed TCPStore port from VLLM_DP_MASTER_PORT + 100 on, probing a
window of 32 ports and binding the first free one later (vllm/v1/executor/ray_executor_v2.py
_select_tcpstore_port). Engines starting at once from one base probe the same port, and all but one then fail with
EADDRINUSE. In a pod each engine has its own network namespace; on one host each needs its own base. An engine
config gets one (the rehearsal's plan), but replicas of one config share its runtime environment, so each
replica's worker process claims a slot here when it starts, and the engine it starts inherits the base.

Ray runs a module's function in a new worker before its actor when the worker's environment names it in
RAY_HOOK_VAR (ray/_private/workers/default_worker.py). A runtime_env's own `worker_process_setup_hook` field becomes
that variable only at ray.init (ray/_private/worker.py upload_worker_process_setup_hook_if_needed), not for a Serve
replica, so the plan sets the variable itself. It names this hook in the field too: Serve LLM puts its own hook
there, and the engine's ray.init refuses a field that differs from the variable (setup_hook.py
_check_setup_hook_consistency). So this hook also runs Serve LLM's. Standard library only: every Ray worker of such
a config imports this module.
"""

from __future__ import annotations

import importlib
import os
import socket

TCPSTORE_BASE = 29500  # the first engine config's VLLM_DP_MASTER_PORT
TCPSTORE_STRIDE = 50  # apart, so vLLM's 32-port windows (base + 100 ...) never overlap
# Worker processes of shared configs on one host (a replica and its engine's Ray worker each take one). Six keep
# every window (slot base + 100 ... + 131, after two configs' own) below Serve's direct-ingress ports (30000-31000).
SLOTS = 6
LOCK_BASE = 29400  # slot i is held by binding 127.0.0.1:LOCK_BASE + i for the worker process's life
FIRST_SLOT_VAR = "REHEARSAL_TCPSTORE_FIRST_SLOT"  # the VLLM_DP_MASTER_PORT of slot 0, set by the plan
HOOK = f"{__name__}.claim"
RAY_HOOK_VAR = (
    "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"  # ray/_private/ray_constants.py WORKER_PROCESS_SETUP_HOOK_ENV_VAR
)
# The hook Serve LLM gives each replica unless RAYLLM_ENABLE_WORKER_PROCESS_SETUP_HOOK=0 (its import of Serve LLM
# saves the replica's start that time: ray/llm/_internal/serve/core/server/llm_server.py get_deployment_options)
SERVE_LLM_HOOK = "ray.llm._internal.serve._worker_process_setup_hook"

_held: list[socket.socket] = []  # the claimed slot's lock, released when the process ends


def slot_base(first: int, slot: int) -> int:
    return first + TCPSTORE_STRIDE * slot


def claim() -> None:
    """The worker hook: the first free slot's base as VLLM_DP_MASTER_PORT, held while the process lives; then Serve
    LLM's own hook, which this one displaces."""
    _claim_slot()
    module, _, function = SERVE_LLM_HOOK.rpartition(".")
    getattr(importlib.import_module(module), function)()


def _claim_slot() -> None:
    first = os.environ.get(FIRST_SLOT_VAR)
    if first is None or _held:
        return
    for slot in range(SLOTS):
        lock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            lock.bind(("127.0.0.1", LOCK_BASE + slot))
        except OSError:
            lock.close()
            continue
        _held.append(lock)
        os.environ["VLLM_DP_MASTER_PORT"] = str(slot_base(int(first), slot))
        return
