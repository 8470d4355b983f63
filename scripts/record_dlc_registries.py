#!/usr/bin/env python3
"""Record which AWS account serves the Deep Learning Containers' `ray` repository in each region, as
config/dlc_registries.json.

AWS publishes the account per region in the SageMaker Python SDK: sagemaker-core's
sagemaker/core/image_uri_config/ray-serve.json lists, for the `ray` repository, one registry account per region
(the Ray Serve LLM images share that repository: aws/deep-learning-containers docs/ray-llm/changelog/index.md).
The record keeps the regions this app deploys to (config/regions.json) and the newest version's registries.

    .venv/bin/python scripts/record_dlc_registries.py [--wheel PATH]   # default: pip download sagemaker-core==<pin>
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from clients.cli_options import regular_file
from config.versions import DLC_REPOSITORY, SAGEMAKER_CORE_VERSION

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "config" / "dlc_registries.json"
SOURCE = "sagemaker/core/image_uri_config/ray-serve.json"


def download(folder: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", str(folder)]
    subprocess.run(command + [f"sagemaker-core=={SAGEMAKER_CORE_VERSION}"], check=True)
    (wheel,) = folder.glob("sagemaker_core-*.whl")
    return wheel


def registries(wheel: Path) -> tuple[str, dict[str, str]]:
    config = json.loads(zipfile.ZipFile(wheel).read(SOURCE))
    newest = max(config["versions"], key=lambda version: tuple(int(part) for part in version.split(".")))
    entry = config["versions"][newest]
    if entry["repository"] != DLC_REPOSITORY:
        raise SystemExit(f"{wheel.name}: {SOURCE}: repository {entry['repository']!r}, expected {DLC_REPOSITORY!r}")
    return newest, entry["registries"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=regular_file, help="a sagemaker-core wheel (default: download the pinned one)")
    args = parser.parse_args()
    deployable = json.loads((ROOT / "config" / "regions.json").read_text())["partitions"]["aws"]["regions"]
    with tempfile.TemporaryDirectory() as scratch:
        version, found = registries(Path(args.wheel) if args.wheel else download(Path(scratch)))
    record = {
        "source": f"sagemaker-core {SAGEMAKER_CORE_VERSION} {SOURCE}, versions[{version!r}].registries "
        f"(repository {DLC_REPOSITORY!r}), the regions of config/regions.json",
        "sagemaker_core": SAGEMAKER_CORE_VERSION,
        "registries": {region: found[region] for region in sorted(deployable) if region in found},
        "without_registry": sorted(set(deployable) - set(found)),
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"wrote {OUT.relative_to(ROOT)}: {len(record['registries'])} regions, {len(record['without_registry'])} without"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
