"""The engine's environment on a GPU worker, as plain data: the worker pod template's `env`
(charts/ray_pods.py builds its typed EnvVars from this) and what `ops rehearse` gives the engines on a
GPU host, which has no cdk8s (one source, so the two cannot drift)."""

from __future__ import annotations

from typing import Any

from config.topology import NIXL_METRICS_PORT


def nixl_telemetry_environment() -> list[dict[str, Any]]:
    """NIXL's Prometheus exporter in the engine's process: /metrics on NIXL_METRICS_PORT, every address, with the
    agent's rx/tx byte and request counters and agent_xfer_time_total (ai-dynamo/nixl src/plugins/telemetry/
    prometheus/README.md: NIXL_TELEMETRY_ENABLE, NIXL_TELEMETRY_EXPORTER selects libtelemetry_exporter_prometheus,
    NIXL_TELEMETRY_PROMETHEUS_PORT). One engine per pod, so one process binds the port (ibid., "Multi-process
    runs")."""
    return [
        {"name": "NIXL_TELEMETRY_ENABLE", "value": "y"},
        {"name": "NIXL_TELEMETRY_EXPORTER", "value": "prometheus"},
        {"name": "NIXL_TELEMETRY_PROMETHEUS_PORT", "value": str(NIXL_METRICS_PORT)},
    ]


# Each JIT's own folder variable, by the subfolder of the node's cache it gets: Triton's compiled kernels
# (triton/knobs.py cache_knobs.dir), vLLM's torch.compile graphs (vllm/envs.py VLLM_CACHE_ROOT), Inductor's kernels
# (torch/_inductor/runtime/cache_dir_utils.py) and FlashInfer's JIT builds (flashinfer/jit/env.py, under .cache/).
KERNEL_CACHES = {
    "TRITON_CACHE_DIR": "triton",
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
}


def kernel_cache_environment(folder: str) -> list[dict[str, Any]]:
    """The engines' compiled kernels kept in `folder` on the node, so a pod restarted there skips compiling them
    (what that saves, and why engines may share it: docs/DECISIONS.md, "Compiled kernels beside the weights")."""
    return [{"name": name, "value": f"{folder}/{sub}"} for name, sub in KERNEL_CACHES.items()]


def worker_environment(*, efa: bool, nixl_metrics: bool = False) -> list[dict[str, Any]]:
    """`nixl_metrics`: PD mode, where NIXL moves the KV cache and its exporter gives the rate (the fabric gate)."""
    env: list[dict[str, Any]] = [
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        # vLLM's NIXL worker asserts this layout for Qwen3.5's state (GDN) layers.
        {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"},
        # INFO makes NIXL log "Created <N> rails using provider=efa": the only proof EFA is used.
        {"name": "NIXL_LOG_LEVEL", "value": "INFO"},
    ]
    if efa:
        env.insert(0, {"name": "FI_PROVIDER", "value": "efa"})
        # libfabric's efa provider takes its buffer pools from 2 MiB huge pages unless told not to (ofiwg/libfabric
        # man/fi_efa.7.md, FI_EFA_USE_HUGE_PAGE); a container that requests none has a hugetlb limit of 0
        # (kubernetes pkg/kubelet/kuberuntime/kuberuntime_container_linux.go GetHugepageLimitsFromResources), so
        # on a node that reserves them the first touch of such a pool would fault (docs/DECISIONS.md, "What EFA
        # needs in the pod"). Ordinary pages instead, within the container's memory limit.
        env.insert(1, {"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"})
    if nixl_metrics:
        env += nixl_telemetry_environment()
    return env
