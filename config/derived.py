"""Values computed from a valid stage config, used by both the rules and the stacks and charts."""
from __future__ import annotations

from dataclasses import dataclass

from .instance_types import INSTANCE_TYPES
from .schema import StageConfig


@dataclass(frozen=True)
class PodResources:
    cpu_request: int
    cpu_limit: int
    memory_request_gib: int
    memory_limit_gib: int
    shm_gib: int
    gpus: int
    efa_interfaces: int


def worker_resources(cfg: StageConfig) -> PodResources:
    """One Ray worker pod per GPU node, holding all the node's GPUs and EFA interfaces.

    Unless the stage says otherwise: limits are half the node and requests a quarter, which leaves the
    other half to the system daemonsets and to the page cache that keeps the weights warm (on a
    g6.8xlarge, 32 vCPU / 128 GiB: cpu 8/16, memory 32Gi/64Gi, the reference deployment's values).
    """
    spec = INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]
    given = cfg.serving.worker_resources
    return PodResources(
        cpu_request=given.cpu_request or max(1, spec.vcpus // 4),
        cpu_limit=given.cpu_limit or max(1, spec.vcpus // 2),
        memory_request_gib=given.memory_request_gib or max(1, spec.memory_gib // 4),
        memory_limit_gib=given.memory_limit_gib or max(1, spec.memory_gib // 2),
        shm_gib=given.shm_gib,
        gpus=spec.gpus,
        efa_interfaces=spec.efa_interfaces if cfg.gpu_nodegroup.efa else 0,
    )
