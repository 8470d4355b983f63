"""Rules of the `serving.worker_resources` and `serving.head_resources` sections (docs/STAGE_FILE.md): each pod
within the node that runs it."""

from __future__ import annotations

from ..derived import (
    efa_pinned_gib,
    gpu_spec,
    system_spec,
    worker_resources,
)
from ..errors import ConfigError
from ..schema import StageConfig

# Room the node keeps for the kubelet, the OS and the system daemonsets (VPC CNI, kube-proxy, EKS Pod
# Identity agent, the two device plugins, node monitoring): what a Ray pod may never ask for.
NODE_RESERVED_VCPUS = 1
NODE_RESERVED_MEMORY_GIB = 4


def pod_resources(cfg: StageConfig, path: str) -> None:
    gpu = gpu_spec(cfg)
    res = worker_resources(cfg)
    cpu_room, mem_room = gpu.vcpus - NODE_RESERVED_VCPUS, gpu.memory_gib - NODE_RESERVED_MEMORY_GIB
    if res.cpu_request > res.cpu_limit:
        raise ConfigError(
            path,
            "serving.worker_resources.cpu_request",
            f"{res.cpu_request} > cpu_limit {res.cpu_limit} (allowed: request <= limit)",
        )
    if res.memory_request_gib > res.memory_limit_gib:
        raise ConfigError(
            path,
            "serving.worker_resources.memory_request_gib",
            f"{res.memory_request_gib} > memory_limit_gib {res.memory_limit_gib} (allowed: request <= limit)",
        )
    if res.cpu_limit > cpu_room:
        raise ConfigError(
            path,
            "serving.worker_resources.cpu_limit",
            f"{res.cpu_limit} vCPUs leave no room for the system daemonsets on a "
            f"{cfg.gpu_nodegroup.instance_type} (allowed: 1 to {cpu_room})",
        )
    if res.memory_limit_gib + res.shm_gib > mem_room:
        raise ConfigError(
            path,
            "serving.worker_resources.memory_limit_gib",
            f"{res.memory_limit_gib} GiB + {res.shm_gib} GiB /dev/shm leave no room on a "
            f"{cfg.gpu_nodegroup.instance_type} (allowed: limit + shm <= {mem_room} GiB)",
        )
    head, system = cfg.serving.head_resources, system_spec(cfg)
    if head.cpu_request > head.cpu_limit or head.memory_request_gib > head.memory_limit_gib:
        raise ConfigError(path, "serving.head_resources", "a request exceeds its limit (allowed: request <= limit)")
    if (
        head.cpu_limit > system.vcpus - NODE_RESERVED_VCPUS
        or head.memory_limit_gib > system.memory_gib - NODE_RESERVED_MEMORY_GIB
    ):
        raise ConfigError(
            path,
            "serving.head_resources",
            f"limits {head.cpu_limit} vCPU / {head.memory_limit_gib} GiB do not fit a "
            f"{cfg.system_nodegroup.instance_type} (allowed: up to "
            f"{system.vcpus - NODE_RESERVED_VCPUS} vCPU / "
            f"{system.memory_gib - NODE_RESERVED_MEMORY_GIB} GiB)",
        )


def efa_buffers(cfg: StageConfig, path: str) -> None:
    """EFA's pinned buffers come out of the Ray worker's memory limit (config/derived.py efa_pinned_gib)."""
    pinned, limit = efa_pinned_gib(cfg), worker_resources(cfg).memory_limit_gib
    if pinned and pinned >= limit:
        raise ConfigError(
            path,
            "serving.worker_resources.memory_limit_gib",
            f"{limit} GiB leaves nothing for the engine beside EFA's {pinned} GiB of pinned buffers (allowed: more "
            f"than {pinned})",
        )
