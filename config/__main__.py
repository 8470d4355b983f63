"""`python -m config validate PATH [PATH ...]`: the same checks as synth, without CDK.

Exit 0 with one summary line per valid file; exit 2 with one `PATH: field: problem` line on the first
invalid file.
"""
from __future__ import annotations

import argparse
import sys

from .errors import ConfigError
from .instance_types import INSTANCE_TYPES
from .loader import load_stage_file


def summary(cfg) -> str:  # noqa: ANN001
    low, desired, high = cfg.gpu_nodegroup.sizes
    spec = INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]
    efa = f"EFA x{spec.efa_interfaces}" if cfg.gpu_nodegroup.efa else "no EFA"
    endpoint = ("public+private" if cfg.cluster.endpoint.private_access else "public") \
        if cfg.cluster.endpoint.public else "private"
    return (f"stage {cfg.stage}: {cfg.region} ({', '.join(cfg.availability_zones)}), "
            f"EKS {cfg.cluster.kubernetes_version} {endpoint} endpoint, "
            f"GPU {desired} x {cfg.gpu_nodegroup.instance_type} in {cfg.gpu_availability_zone} ({efa}), "
            f"serving {cfg.serving.model.id} mode={cfg.serving.mode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check stage files")
    validate.add_argument("paths", nargs="+", metavar="PATH")
    args = parser.parse_args(argv)
    for path in args.paths:
        try:
            cfg = load_stage_file(path)
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"{path}: ok: {summary(cfg)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
