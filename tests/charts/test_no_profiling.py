"""The verify group's GET on the Ray dashboard is read-only only while RAY_DASHBOARD_ENABLE_PROFILING is off:
with it on, the dashboard's profiling GETs (stack trace, CPU flame graph, memory profile) attach py-spy or
memray to a worker (Ray docs, ray-observability/user-guides/profiling.html "Enabling dashboard profiling";
the flag: python/ray/_private/ray_constants.py, read by dashboard/modules/reporter/reporter_head.py). No
rendered object sets it, and no field of a stage file can add it (SECURITY.md)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from config import ConfigError

from ..helpers import config_with
from .test_inference_chart import chart_objects

NAME = "RAY_DASHBOARD_ENABLE_PROFILING"


def _containers(node: Any):
    """Every container and init container of every pod template anywhere in an object."""
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            if isinstance(node.get(key), list):
                yield from node[key]
        for value in node.values():
            yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


@pytest.mark.parametrize(
    "stage, change",
    [
        ("dev", {}),
        ("prod", {}),
        ("dev", {"serving": {"mode": "colocated"}}),
        ("dev", {"serving": {"hf_token_secret": "hf/token"}}),
    ],
)
def test_no_rendered_object_enables_dashboard_profiling(stage, change, tmp_path):
    cfg = config_with(tmp_path, stage, **change)
    objects = chart_objects(cfg)
    assert NAME not in yaml.safe_dump_all(objects)  # serveConfigV2's runtime_env and every ConfigMap included
    containers = [c for o in objects for c in _containers(o)]
    assert containers  # the walk found the Ray pods
    for container in containers:
        # envFrom would bring a ConfigMap's or Secret's keys in unseen: none is used
        assert "envFrom" not in container, container["name"]
        assert all(item["name"] != NAME for item in container.get("env", []))


@pytest.mark.parametrize(
    "placement",
    [
        {"serving": {"env": {NAME: "1"}}},
        {"serving": {"engine": {"extra_args": {NAME: 1}}}},
        {"serving": {"engine": {"extra_args": {NAME.lower(): 1}}}},
        {"serving": {"head": {"env": [{"name": NAME, "value": "1"}]}}},
        {"serving": {"runtime_env": {"env_vars": {NAME: "1"}}}},
    ],
)
def test_a_stage_file_cannot_add_it(placement, tmp_path):
    with pytest.raises(ConfigError):
        config_with(tmp_path, "dev", **placement)
