"""config/chart_values/ holds the Helm charts' default values as committed data: every file there is listed in
its SOURCE.md with the sha256 it was taken with, and every listed file is there, unchanged."""

from __future__ import annotations

import hashlib
import re

from config import versions

from ..helpers import CHART_VALUES

ROW = re.compile(
    r"^\| `(?P<file>[^`]+\.values\.yaml)` \| (?P<chart>[^|]+?) \| (?P<version>[^|]+?) \| "
    r"`(?P<sha256>[0-9a-f]{64})` \|$",
    re.MULTILINE,
)


def _rows() -> dict[str, dict[str, str]]:
    text = (CHART_VALUES / "SOURCE.md").read_text()
    rows = [m.groupdict() for m in ROW.finditer(text)]
    assert len({r["file"] for r in rows}) == len(rows), "a file is listed twice in SOURCE.md"
    return {r["file"]: r for r in rows}


def test_every_values_file_is_listed_with_its_digest_and_nothing_else_is_there():
    rows = _rows()
    on_disk = {p.name for p in CHART_VALUES.iterdir()} - {"SOURCE.md"}
    assert sorted(on_disk) == sorted(rows), "config/chart_values/ and its SOURCE.md list different files"
    for name, row in rows.items():
        digest = hashlib.sha256((CHART_VALUES / name).read_bytes()).hexdigest()
        assert digest == row["sha256"], f"{name}: sha256 {digest}, SOURCE.md records {row['sha256']}"


def test_the_files_are_those_of_the_pinned_chart_versions():
    rows = {(r["chart"], r["version"]): r["file"] for r in _rows().values()}
    for pin in (versions.KUBERAY_OPERATOR, versions.NVIDIA_DEVICE_PLUGIN, versions.EFA_DEVICE_PLUGIN):
        assert rows.get((pin.chart, pin.version)) == f"{pin.chart}-{pin.version}.values.yaml", (
            f"no defaults for {pin.chart} {pin.version} in config/chart_values/SOURCE.md"
        )
