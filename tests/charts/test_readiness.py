"""The readiness checks' expectations of a stage (charts/readiness.py): what the chart and the nodegroup deploy."""

from __future__ import annotations

from charts.readiness import readiness_target
from charts.serve_config import build_serve_config

from ..helpers import config_with


def test_the_target_names_the_application_the_serve_config_deploys(dev):
    (application,) = build_serve_config(dev.serving)["applications"]
    assert readiness_target(dev).app_name == application["name"]


def test_the_target_expects_each_gpu_node_and_its_devices(dev):
    target = readiness_target(dev)
    assert (target.gpu_selector, target.gpu_nodes, target.gpus, target.efa_interfaces) == ("role=gpu-worker", 2, 1, 1)


def test_without_efa_the_target_expects_no_efa_device(tmp_path):
    cfg = config_with(tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_transfer_floor_gbps": 1})
    assert readiness_target(cfg).efa_interfaces == 0
