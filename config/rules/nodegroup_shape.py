"""The checks `system_nodegroup` and `gpu_nodegroup` share (config/rules/system_nodegroup.py, gpu_nodegroup.py):
a known instance type, min <= desired <= max, and a root volume that holds two serving images."""

from __future__ import annotations

from ..errors import ConfigError
from ..instance_types import known_types


def sizes(path: str, field: str, low: int, desired: int, high: int) -> None:
    if not low <= desired <= high:
        raise ConfigError(path, field, f"min {low}, desired {desired}, max {high} (allowed: min <= desired <= max)")


def known_type(path: str, field: str, instance_type: str, *, gpu: bool) -> None:
    if instance_type not in known_types(gpu=gpu):
        raise ConfigError(
            path,
            f"{field}.instance_type",
            f"{instance_type!r} is not a known {'GPU' if gpu else 'CPU'} instance type "
            f"(allowed: {', '.join(known_types(gpu=gpu))})",
        )


def root_volume(path: str, field: str, given: int, floor: int, also: str) -> None:
    """Two serving images side by side within kubelet's image-GC threshold (config/first_start.py)."""
    if given < floor:
        raise ConfigError(
            path,
            f"{field}.root_volume_gib",
            f"{given} GiB cannot hold two serving images{also} below kubelet's 85 % image-GC threshold "
            f'(allowed: {floor} or more; docs/DECISIONS.md, "Root volumes and the first start")',
        )
