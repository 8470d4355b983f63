"""Rules of the `system_nodegroup` section (docs/STAGE_FILE.md)."""

from __future__ import annotations

from .. import first_start
from ..schema import StageConfig
from .nodegroup_shape import known_type, root_volume, sizes


def type_sizes_and_volume(cfg: StageConfig, path: str) -> None:
    group = cfg.system_nodegroup
    known_type(path, "system_nodegroup", group.instance_type, gpu=False)
    sizes(path, "system_nodegroup", group.min_size, group.desired_size, group.max_size)
    root_volume(path, "system_nodegroup", group.root_volume_gib, first_start.system_root_volume_floor_gib(), "")
