"""The AWS regions and partitions a stage may name (config/regions.json, from botocore): a table that the schema's
`region` validator and the top-level rules (config/rules/top_level.py) read; it imports no rule."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from .errors import did_you_mean, short

REGIONS_FILE = Path(__file__).with_name("regions.json")


@functools.lru_cache(maxsize=1)
def regions_table() -> dict[str, Any]:
    return json.loads(REGIONS_FILE.read_text())


def stage_regions() -> list[str]:
    table = regions_table()
    return sorted(r for p in table["stage_partitions"] for r in table["partitions"][p]["regions"])


def partition_of(region: str) -> str | None:
    for partition, data in regions_table()["partitions"].items():
        if region in data["regions"]:
            return partition
    return None


def region_problem(region: str) -> str | None:
    """None for a region of the partitions this app deploys to (config/regions.json, from botocore), else
    what is wrong: a field validator of `region` raises it."""
    regions = stage_regions()
    if region in regions:
        return None
    partition = partition_of(region)
    if partition:
        return (
            f"{region} is a region of the {partition} partition; this app deploys to "
            f"{', '.join(regions_table()['stage_partitions'])} only (its CDK target partitions and its serving "
            f"image) (allowed: {', '.join(regions)})"
        )
    return (
        f"{short(region)} is not an AWS region{did_you_mean(region, regions)} (config/regions.json, from "
        f"botocore {regions_table()['botocore']}) (allowed: {', '.join(regions)})"
    )
