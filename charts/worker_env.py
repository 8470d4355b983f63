"""The engine's environment on a GPU worker, as plain data: the worker pod template's `env`
(charts/ray_pods.py builds its typed EnvVars from this) and what `ops rehearse` gives the engines on a
GPU host, which has no cdk8s (one source, so the two cannot drift)."""

from __future__ import annotations

from typing import Any


def worker_environment(*, efa: bool) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # vLLM's NIXL worker asserts this layout for Qwen3.5's state (GDN) layers.
        {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"},
        # INFO makes NIXL log "Created <N> rails using provider=efa": the only proof EFA is used.
        {"name": "NIXL_LOG_LEVEL", "value": "INFO"},
    ]
    if efa:
        env.insert(0, {"name": "FI_PROVIDER", "value": "efa"})
    return env
