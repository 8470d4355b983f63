"""References a stage file names: the serving image (its grammar, its registry by region), the model id clients
ask for, the VPC range and the endpoint's ranges. Each class by its rule, not by the examples that found it."""

from __future__ import annotations

import json

import pytest

from config import versions
from config.derived import is_unreachable

from ..helpers import ROOT, config_with
from ..helpers import refusal as _refusal

RECORD = json.loads((ROOT / "config" / "dlc_registries.json").read_text())


# --- the DLC image's registry, by region ------------------------------------------------------------------------


def test_every_deployable_region_has_its_registry_or_is_listed_without():
    deployable = json.loads((ROOT / "config" / "regions.json").read_text())["partitions"]["aws"]["regions"]
    assert sorted(RECORD["registries"]) + RECORD["without_registry"] == sorted(deployable)
    assert all(len(account) == 12 and account.isdigit() for account in RECORD["registries"].values())


@pytest.mark.parametrize(
    "region, account",
    [("us-west-2", "763104351884"), ("ap-east-1", "871362719292"), ("eu-south-2", "503227376785")],
)
def test_the_default_image_is_pulled_from_the_region_s_own_registry(region, account):
    assert versions.dlc_image(region) == f"{account}.dkr.ecr.{region}.amazonaws.com/ray:serve-llm-cuda-v1.0.0"


def test_a_region_without_a_registry_is_refused_unless_an_image_is_named(tmp_path, monkeypatch):
    monkeypatch.delitem(versions.DLC_REGISTRIES, "ap-east-1")
    change = {"region": "ap-east-1", "availability_zones": ["ap-east-1a", "ap-east-1b"]}
    change["gpu_availability_zone"] = "ap-east-1a"
    line = _refusal(tmp_path, change)
    assert ": region: ap-east-1 has no registry of the Ray Serve LLM Deep Learning Container" in line
    image = "123456789012.dkr.ecr.ap-east-1.amazonaws.com/ray:serve-llm-cuda-v1.0.0"
    assert config_with(tmp_path, **change, serving={"image": image}).image == image


# --- the image reference's grammar --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        ":::",
        "@@@",
        "a:b:c",
        "registry.example.com/Ray:tag",  # upper case in a path component
        "registry.example.com/ray",  # no tag, no digest: `latest`
        "registry.example.com/ray:",
        "registry.example.com//ray:tag",
        "-registry.example.com/ray:tag",
        "registry.example.com/ray:-tag",
        "registry.example.com/ray@sha256:abc",  # a digest too short to be one
        "registry.example.com/ray:" + "t" * 129,
        "registry.example.com/ray..x:tag",
    ],
)
def test_a_string_that_is_no_pinned_image_reference_is_refused(tmp_path, image):
    line = _refusal(tmp_path, {"serving": {"image": image}})
    assert ": serving.image: " in line and "(allowed: [registry[:port]/]lower-case/path:tag or " in line


@pytest.mark.parametrize(
    "image, problem",
    [
        ("registry.example.com:65536/ray:2.58.0", "names registry port 65536, not a TCP port from 1 to 65535"),
        ("registry.example.com:99999/ray:2.58.0", "names registry port 99999, not a TCP port"),
        ("registry.example.com:0/ray:2.58.0", "names registry port 0, not a TCP port"),
        ("registry.example.com:05000/ray:2.58.0", "names registry port 05000, not a TCP port"),
        ("registry.example.com/ray@sha256:" + "a" * 63, "has a digest that is not sha256: and 64 lower-case hex"),
        ("registry.example.com/ray@sha256:" + "a" * 65, "has a digest that is not sha256: and 64 lower-case hex"),
        ("registry.example.com/ray@sha256:" + "A" * 64, "has a digest that is not sha256: and 64 lower-case hex"),
        ("registry.example.com/ray@sha512:" + "a" * 128, "has a digest that is not sha256: and 64 lower-case hex"),
        ("registry.example.com/ray@md5:" + "a" * 32, "has a digest that is not sha256: and 64 lower-case hex"),
        ("registry.example.com/ray:latest", "is tagged latest, which moves to whatever image was pushed last"),
        ("registry.example.com/ray:LATEST", "is tagged LATEST, which moves"),
        ("registry.example.com/ray:latest@sha256:" + "a" * 64, "is tagged latest, which moves"),
        ("ray", "has no tag or digest, so it pulls latest, which moves"),
    ],
)
def test_an_image_no_registry_can_serve_or_that_moves_is_refused_by_why(tmp_path, image, problem):
    line = _refusal(tmp_path, {"serving": {"image": image}})
    assert f": serving.image: '{image[:30]}" in line and f" {problem}" in line, line


@pytest.mark.parametrize(
    "image",
    [
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0.0",
        "localhost:5000/team/ray-llm:2.58.0_cu13",
        "registry.example.com/ray@sha256:" + "a" * 64,
        "registry.example.com/ray:v1@sha256:" + "0" * 64,
        "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda-v1.0.0",
        "registry.example.com:65535/ray:2.58.0",
        "registry.example.com:1/ray:latest-2.58",
    ],
)
def test_pinned_image_references_pass(tmp_path, image):
    assert config_with(tmp_path, serving={"image": image, "ray_version": "2.58.0"}).image == image


# --- the model id -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", ["qwen:lora", "qwen3.5-9b:", "a:b:c"])
def test_a_model_id_with_a_colon_is_refused(tmp_path, model_id):
    line = _refusal(tmp_path, {"serving": {"model": {"id": model_id}}})
    assert f": serving.model.id: '{model_id}' has a ':', which Ray Serve LLM reads as base-model:LoRA-adapter" in line


# --- ranges -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cidr", ["224.0.0.0/3", "224.0.0.0/4", "240.0.0.0/5", "172.16.0.0/13", "169.254.0.0/16"])
def test_a_range_made_only_of_special_purpose_blocks_is_unreachable(cidr):
    assert is_unreachable(cidr)


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "8.8.8.0/24", "192.168.0.0/15", "223.0.0.0/7"])
def test_a_range_with_a_public_address_is_not(cidr):
    assert not is_unreachable(cidr)


def test_a_multicast_endpoint_range_is_refused(tmp_path):
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": ["224.0.0.0/3"]}}})
    assert ": cluster.endpoint.public_access_cidrs" in line and "224.0.0.0/3" in line


@pytest.mark.parametrize("address", ["203.0.113.7", "8.8.8.8"])
def test_an_endpoint_address_without_a_prefix_length_is_refused_with_its_cidr(tmp_path, address):
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": [address]}}})
    assert f": cluster.endpoint.public_access_cidrs[0]: {address} has no prefix length" in line
    assert f"(allowed: {address}/32 for this one address, or its range)" in line
