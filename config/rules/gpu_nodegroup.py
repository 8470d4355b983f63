"""Rules of the `gpu_nodegroup` section (docs/STAGE_FILE.md): a known GPU type, its sizes, EFA, and a root volume
that holds the serving images and the model's weights."""

from __future__ import annotations

from .. import first_start
from ..derived import (
    gpu_spec,
)
from ..errors import ConfigError
from ..instance_types import INSTANCE_TYPES, known_types
from ..schema import StageConfig
from .nodegroup_shape import known_type, root_volume, sizes


def root_volume_for_model(cfg: StageConfig, path: str) -> None:
    """Last: a model too large for its GPUs, or an engine setting it cannot run, is the first thing to fix."""
    floor = first_start.gpu_root_volume_floor_gib(cfg)
    root_volume(path, "gpu_nodegroup", cfg.gpu_nodegroup.root_volume_gib, floor, " and the model's weights")


def type_sizes_and_efa(cfg: StageConfig, path: str) -> None:
    group = cfg.gpu_nodegroup
    known_type(path, "gpu_nodegroup", group.instance_type, gpu=True)
    low, desired, high = group.sizes
    sizes(path, "gpu_nodegroup", low, desired, high)
    spec = gpu_spec(cfg)
    if group.efa and not spec.has_efa:
        efa_types = [name for name in known_types(gpu=True) if INSTANCE_TYPES[name].has_efa]
        raise ConfigError(
            path,
            "gpu_nodegroup.efa",
            f"{group.instance_type} has no EFA interface (allowed: efa: false, or an EFA type: {', '.join(efa_types)})",
        )
