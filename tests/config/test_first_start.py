"""config/first_start.py: the root-volume floors and the first start's wait, from the stated figures."""

from __future__ import annotations

import pytest

from config import first_start as fs
from config import versions

from ..helpers import config_with


def test_two_images_are_both_unpacked_plus_the_new_one_compressed():
    assert fs.image_disk_gib(10.0) == pytest.approx(10.0 * versions.DLC_IMAGE_UNPACK_RATIO * 2 + 10.0)


def test_system_floor_keeps_the_images_and_the_node_below_the_gc_threshold():
    # (8 + 2 x 9.3 x 2.14 + 9.3) / 0.85 = 67.18 -> 68 with the planning figure.
    assert fs.system_root_volume_floor_gib() == 68
    assert fs.system_root_volume_floor_gib(20.0) == 134  # (8 + 105.6) / 0.85 = 133.6


def test_gpu_floor_adds_the_weight_cache(dev):
    weights = fs.weights_gib(dev)
    assert weights == pytest.approx(17.98, abs=0.01)  # Qwen3.5-9B in bfloat16 (config/derived.py KNOWN_MODELS)
    assert fs.gpu_root_volume_floor_gib(dev) == 89  # (8 + 49.1 + 17.98) / 0.85 = 88.3


def test_unknown_model_size_takes_the_gpu_memory_as_the_weights(tmp_path):
    cfg = config_with(tmp_path, serving={"model": {"id": "mystery", "source": "example/mystery-model"}})
    assert fs.weights_gib(cfg) == 24.0  # g6.8xlarge: one L4 of 24 GiB


def test_critical_path_is_the_slower_pull_then_weights_then_engine(dev):
    start = fs.first_start(dev)
    assert start.head_pull_s > start.worker_pull_s  # m7i.xlarge's 1.56 Gbps baseline against g6.8xlarge's 25
    assert start.weights_s == pytest.approx(24 * 1024 / fs.GP3_WRITE_MIB_S)  # one L4's 24 GiB; gp3, not NAT, limits
    assert start.critical_path_s == pytest.approx(start.head_pull_s + start.weights_s + start.engine_s)


def test_wait_is_the_path_with_its_margin_rounded_up_to_a_minute(dev):
    start = fs.first_start(dev)
    assert start.verify_wait_s % 60 == 0
    assert start.critical_path_s * fs.WAIT_MARGIN <= start.verify_wait_s < start.critical_path_s * fs.WAIT_MARGIN + 60
    assert start.verify_timeout_minutes == start.verify_wait_s // 60 + fs.VERIFY_SETUP_MINUTES


def test_the_wait_does_not_depend_on_the_model(dev, tmp_path):
    other = config_with(tmp_path, serving={"model": {"id": "llama-3.1-8b", "source": "example-org/Llama-3.1-8B"}})
    assert fs.weights_gib(other) != fs.weights_gib(dev)
    assert fs.first_start(other) == fs.first_start(dev)


def test_more_gpu_nodes_share_the_nat_gateway(dev, tmp_path):
    many = config_with(tmp_path, gpu_nodegroup={"count": 16})
    nat_share = fs.NAT_GBPS * 1e9 / 8 / 2**20 / 16
    assert nat_share < fs.GP3_WRITE_MIB_S
    assert fs.first_start(many).weights_s == pytest.approx(24 * 1024 / nat_share)
    assert fs.first_start(many).verify_wait_s > fs.first_start(dev).verify_wait_s


def test_readme_and_decisions_state_the_waits_the_code_computes(stages):
    from ..helpers import ROOT

    dev, prod = (fs.first_start(stages[name]) for name in ("dev", "prod"))
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"waits `--wait {dev.verify_wait_s}` for dev" in readme and f"{prod.verify_wait_s:,} s for prod" in readme
    decisions = " ".join((ROOT / "docs" / "DECISIONS.md").read_text().split())
    assert f"`--wait {dev.verify_wait_s}`" in decisions and f"({dev.verify_timeout_minutes})" in decisions
    assert f"{prod.verify_wait_s:,} s, {prod.verify_timeout_minutes} minutes" in decisions
    assert f"system floor (8 + 49.1) / 0.85 = {fs.system_root_volume_floor_gib()} GiB" in decisions


def test_the_pull_reads_the_instance_table_and_refuses_a_type_it_does_not_list():
    # The image's compressed layers at g6.8xlarge's 25 Gbps (config/instance_types.py), then unpacked to gp3.
    compressed = versions.DLC_IMAGE_COMPRESSED_GIB
    link_mib_s = 25.0 * 1e9 / 8 / 2**20
    expected = compressed * 1024 / link_mib_s + compressed * versions.DLC_IMAGE_UNPACK_RATIO * 1024 / fs.GP3_WRITE_MIB_S
    assert fs._pull_s("g6.8xlarge") == pytest.approx(expected)
    with pytest.raises(KeyError, match=r"g9\.huge is not in config/instance_types.py INSTANCE_TYPES"):
        fs._pull_s("g9.huge")
