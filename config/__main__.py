"""`python -m config validate PATH [PATH ...]`: the same checks as synth, without CDK.

A PATH is a stage file or a folder of them (every `<stage>.yaml` there, and its `_pipeline.yaml` if
any, checked as synth checks the folder). The stages given are also checked together: no two may give
one AWS name to two resources in one account and region. Exit 0 with one summary line per valid file;
exit 2 with one `PATH: field: problem` line for the first problem, and nothing on stdout. Paths are
printed as given. Runs from anywhere: `python -m config` with the checkout on PYTHONPATH, or
`python /path/to/checkout/config validate ...`.
"""

from __future__ import annotations

import sys

if __package__ in (None, ""):  # `python config/__main__.py` or `python config`: import as the package
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from config.__main__ import main

    sys.exit(main())

import argparse
import os
from pathlib import Path

from .errors import ConfigError
from .instance_types import INSTANCE_TYPES
from .loader import load_stage_file, stage_files
from .rules import check_together


def summary(cfg) -> str:
    low, desired, high = cfg.gpu_nodegroup.sizes
    spec = INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]
    efa = f"EFA x{spec.efa_interfaces}" if cfg.gpu_nodegroup.efa else "no EFA"
    endpoint = (
        ("public+private" if cfg.cluster.endpoint.private_access else "public")
        if cfg.cluster.endpoint.public
        else "private"
    )
    return (
        f"stage {cfg.stage}: {cfg.region} ({', '.join(cfg.availability_zones)}), "
        f"EKS {cfg.cluster.kubernetes_version} {endpoint} endpoint, "
        f"GPU {desired} x {cfg.gpu_nodegroup.instance_type} in {cfg.gpu_availability_zone} ({efa}), "
        f"serving {cfg.serving.model.id} mode={cfg.serving.mode}"
    )


def _validate_folder(folder: str) -> list[tuple[object, str]]:
    from .pipeline import load_pipeline  # the pipeline file of the folder, as app.py checks it

    files = stage_files(folder)
    if not files:
        raise ConfigError(folder, "(folder)", "no stage files (expected <stage>.yaml files)")
    loaded = [(load_stage_file(os.path.join(folder, file.name)), os.path.join(folder, file.name)) for file in files]
    load_pipeline(folder, [cfg.stage for cfg, _ in loaded])
    return loaded


def validate(paths: list[str]) -> list[str]:
    """The summary lines of every stage in `paths`, or the first problem as a ConfigError."""
    loaded: list[tuple[object, str]] = []
    for path in paths:
        if Path(path).is_dir():
            loaded += _validate_folder(path)
        else:
            loaded.append((load_stage_file(path), path))
    # one file named twice (`dev.yaml` and its folder) is one stage, not a collision with itself
    distinct = {os.path.realpath(path): (cfg, path) for cfg, path in reversed(loaded)}
    check_together([distinct[key] for key in dict.fromkeys(os.path.realpath(path) for _, path in loaded)])
    return [f"{path}: ok: {summary(cfg)}" for cfg, path in loaded]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    validate_cmd = sub.add_parser("validate", help="check stage files, or every stage file of a folder")
    validate_cmd.add_argument("paths", nargs="+", metavar="PATH")
    args = parser.parse_args(argv)
    try:
        lines = validate(args.paths)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
