"""config/instance_types.py against EC2's own DescribeInstanceTypes answers, as moto records them from AWS
(moto/ec2/resources/instance_types.json.gz of the pinned moto: the fields EC2 returns, per type). The table
is written by hand from the instance-type pages; this is where a wrong row shows without an AWS account."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import moto
import pytest

from config.instance_types import INSTANCE_TYPES

RECORDED = json.loads(
    gzip.decompress((Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz").read_bytes())
)


def _ec2(instance_type: str) -> dict:
    return RECORDED[instance_type]


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_TYPES))
def test_vcpus_and_memory_are_ec2_s(instance_type):
    spec, ec2 = INSTANCE_TYPES[instance_type], _ec2(instance_type)
    assert (spec.vcpus, spec.memory_gib) == (ec2["VCpuInfo"]["DefaultVCpus"], ec2["MemoryInfo"]["SizeInMiB"] // 1024)


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_TYPES))
def test_gpus_are_ec2_s(instance_type):
    spec, gpus = INSTANCE_TYPES[instance_type], _ec2(instance_type).get("GpuInfo", {}).get("Gpus", [])
    assert (spec.gpus, spec.gpu_model) == ((gpus[0]["Count"], gpus[0]["Name"]) if gpus else (0, ""))


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_TYPES))
def test_efa_interfaces_are_ec2_s_maximum(instance_type):
    network = _ec2(instance_type)["NetworkInfo"]
    maximum = network["EfaInfo"]["MaximumEfaInterfaces"] if network.get("EfaSupported") else 0
    assert INSTANCE_TYPES[instance_type].efa_interfaces == maximum


def _baseline_gbps(network: dict) -> float:
    """The type's baseline: its NetworkPerformance where that is a fixed figure ("25 Gigabit", "4x 100 Gigabit");
    for an "Up to" figure, the card's BaselineBandwidthInGbps (per-card figures of multi-card types repeat the
    whole: g6e.48xlarge lists 400 on each of 4 cards)."""
    performance = network["NetworkPerformance"]
    if performance.startswith("Up to"):
        (card,) = network["NetworkCards"]
        return card["BaselineBandwidthInGbps"]
    match = re.fullmatch(r"(?:(\d+)x )?(\d+(?:\.\d+)?) Gigabit", performance)
    assert match, performance
    return int(match.group(1) or 1) * float(match.group(2))


@pytest.mark.parametrize("instance_type", sorted(INSTANCE_TYPES))
def test_network_bandwidth_is_ec2_s_baseline(instance_type):
    """The baseline, not the "up to" burst (EC2 rounds m7i.xlarge's 1.5625 to 1.562)."""
    baseline = _baseline_gbps(_ec2(instance_type)["NetworkInfo"])
    assert INSTANCE_TYPES[instance_type].network_gbps == pytest.approx(baseline, rel=1e-3)
