"""The KV transfer's floor (serving.kv_transfer_floor_gbps): derived from the GPU type's EFA bandwidth in the
instance table, stated by a stage without EFA, refused where it cannot mean anything."""

from __future__ import annotations

import pytest

from config.derived import KV_FLOOR_FRACTION, kv_transfer_floor_gbps
from config.errors import ConfigError
from config.instance_types import INSTANCE_TYPES

from ..helpers import config_with


def test_every_row_of_the_instance_table_has_its_network_bandwidth():
    assert all(spec.network_gbps > 0 for spec in INSTANCE_TYPES.values())


def test_one_efa_interface_is_the_types_bandwidth_over_its_interfaces():
    assert INSTANCE_TYPES["g6.8xlarge"].efa_interface_gbps == 25.0  # one interface of 25 Gbps
    assert INSTANCE_TYPES["p5.48xlarge"].efa_interface_gbps == 100.0  # 3200 Gbps over 32
    assert INSTANCE_TYPES["g6.xlarge"].efa_interface_gbps == 0.0  # no EFA


def test_dev_derives_a_quarter_of_its_one_interface(dev):
    assert dev.serving.kv_transfer_floor_gbps is None
    assert KV_FLOOR_FRACTION == 0.25
    assert kv_transfer_floor_gbps(dev) == 6.25


def test_a_stated_floor_wins(tmp_path):
    cfg = config_with(tmp_path, serving={"kv_transfer_floor_gbps": 10})
    assert kv_transfer_floor_gbps(cfg) == 10


def test_colocated_mode_has_no_floor(tmp_path):
    assert kv_transfer_floor_gbps(config_with(tmp_path, serving={"mode": "colocated"})) is None


def test_a_stage_without_efa_states_its_own(tmp_path):
    cfg = config_with(
        tmp_path,
        gpu_nodegroup={"efa": False},
        serving={"kv_backend": "UCX", "kv_transfer_floor_gbps": 1.5},
    )
    assert kv_transfer_floor_gbps(cfg) == 1.5


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (
            {"gpu_nodegroup": {"efa": False}, "serving": {"kv_backend": "UCX"}},
            "required with gpu_nodegroup.efa false",
        ),
        ({"serving": {"mode": "colocated", "kv_transfer_floor_gbps": 5}}, "colocated mode moves no KV cache"),
        ({"serving": {"kv_transfer_floor_gbps": 30}}, "above one EFA interface of g6.8xlarge (25 Gbps)"),
        ({"serving": {"kv_transfer_floor_gbps": 0}}, "greater than 0"),
    ],
)
def test_refused_in_one_line_naming_file_and_field(tmp_path, change, phrase):
    with pytest.raises(ConfigError) as caught:
        config_with(tmp_path, **change)
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.field == "serving.kv_transfer_floor_gbps"
    assert message.startswith(str(tmp_path)) and phrase in message


def test_efa_buffers_come_out_of_the_worker_memory_limit(tmp_path):
    # one EFA interface on g6.8xlarge: 1 GiB of pinned buffers (config/derived.py EFA_PINNED_GIB_PER_INTERFACE)
    with pytest.raises(ConfigError) as caught:
        config_with(tmp_path, serving={"worker_resources": {"memory_request_gib": 1, "memory_limit_gib": 1}})
    assert caught.value.field == "serving.worker_resources.memory_limit_gib"
    assert "EFA's 1 GiB of pinned buffers" in str(caught.value)
    config_with(tmp_path, serving={"worker_resources": {"memory_request_gib": 2, "memory_limit_gib": 2}})
