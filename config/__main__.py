"""`python -m config validate [PATH ...]` (also `pd-inference validate`): the same checks as synth, without CDK.

A PATH is a stage file or a folder of them (every `<stage>.yaml` there, and its `_pipeline.yaml` if
any, checked as synth checks the folder); --config-dir DIR is one more folder, and with no PATH and no
--config-dir the checkout's config/ is checked. The stages given are also checked together: no two may give
one AWS name to two resources in one account and region. Exit 0 with one summary line per valid file (with
--json: one JSON document); exit 2 with one `PATH: field: problem` line for the first problem, and nothing
on stdout. Paths are printed as given. Runs from anywhere as `pd-inference validate` or `python
/path/to/checkout/config validate` with the project's venv (scripts/setup.sh installs the project there), or as
`python -m config validate` in the checkout (or with it on PYTHONPATH).
"""

from __future__ import annotations

import sys

if not __package__:  # `python config` or `python config/__main__.py`: the package as installed (scripts/setup.sh)
    from pathlib import Path

    def _installed_here() -> bool:
        try:
            import config
        except ModuleNotFoundError as exc:
            if exc.name != "config":
                raise
            return False
        return Path(config.__file__).resolve().parent == Path(__file__).resolve().parent

    if not _installed_here():
        print(
            f"config: this Python does not have the checkout {Path(__file__).resolve().parent.parent} installed: "
            "run `python -m config validate PATH` in it, or its `pd-inference validate PATH` (scripts/setup.sh "
            "installs it into .venv)",
            file=sys.stderr,
        )
        sys.exit(2)
    import importlib

    sys.exit(importlib.import_module("config.__main__").main())

import argparse
import json
import os
from pathlib import Path

from clients.cli_options import OneLineParser

from .derived import gpu_spec
from .errors import ConfigError
from .loader import CONFIG_DIR, load_stage_file, require_folder, stage_files
from .rules import check_together, placeholder_warnings, warnings
from .schema import StageConfig


def summary(cfg) -> str:
    _, desired, _ = cfg.gpu_nodegroup.sizes
    spec = gpu_spec(cfg)
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


def _later(line: str) -> None:
    """A stage's warnings wait until every file is valid (run): a refusal stays the one line on stderr."""


def _validate_folder(folder: str) -> list[tuple[StageConfig, str]]:
    from .pipeline import load_pipeline  # the pipeline file of the folder, as app.py checks it

    files = stage_files(folder)
    if not files:
        raise ConfigError(folder, "(folder)", "no stage files (expected <stage>.yaml files)")
    paths = [os.path.join(folder, file.name) for file in files]
    loaded = [(load_stage_file(path, _later), path) for path in paths]
    load_pipeline(folder, [cfg.stage for cfg, _ in loaded])
    return loaded


def _load(paths: list[str]) -> list[tuple[StageConfig, str]]:
    """(stage, path as given) of every stage file in `paths`, checked one by one and together."""
    loaded: list[tuple[StageConfig, str]] = []
    for path in paths:
        if not path.strip():  # Path("") is the current folder: not what an empty argument means
            raise ConfigError(repr(path), "(file)", "an empty path (give a stage file or a folder of them)")
        if os.path.isdir(path):  # load_stage_file says why anything else cannot be read
            loaded += _validate_folder(path)
        else:
            loaded.append((load_stage_file(path, _later), path))
    # one file named twice (`dev.yaml` and its folder) is one stage, not a collision with itself
    distinct = {os.path.realpath(path): (cfg, path) for cfg, path in reversed(loaded)}
    check_together([distinct[key] for key in dict.fromkeys(os.path.realpath(path) for _, path in loaded)])
    return loaded


def validate(paths: list[str]) -> list[str]:
    """The summary lines of every stage in `paths`, or the first problem as a ConfigError."""
    return [f"{path}: ok: {summary(cfg)}" for cfg, path in _load(paths)]


DESCRIPTION = (
    "Check stage files, or every stage file of a folder, as synth does (without CDK), and the stages together.\n"
    "Exit 0: every file is valid (one summary line each; a warning line on stderr for each of its warnings, e.g. GPUs\n"
    "the replicas leave idle, and each placeholder an example stage ships: no admin principal, a documentation range\n"
    "as the endpoint's CIDR); exit 2: the first problem, one `PATH: field: problem` line on stderr, nothing on stdout."
)


def add_parser(sub) -> argparse.ArgumentParser:
    """`validate`: the command protocol of ops/__main__.py (`pd-inference validate`), and `python -m config`'s."""
    cmd = sub.add_parser("validate", help="check stage files, or every stage file of a folder", description=DESCRIPTION)
    cmd.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="a stage file or a folder of them (default: the --config-dir folder)",
    )
    cmd.add_argument(
        "--config-dir",
        metavar="DIR",
        help=f"a folder of stage files to check too (default, when no PATH is given: {CONFIG_DIR})",
    )
    cmd.add_argument(
        "--json", action="store_true", help="print the result as JSON (every file's path, stage and summary)"
    )
    return cmd


def run(args) -> int:
    # a --config-dir given empty is checked as given ("" is no folder), not read as the default
    paths = [*args.paths, *([] if args.config_dir is None else [args.config_dir])] or [str(CONFIG_DIR)]
    try:
        if args.config_dir:  # a folder, where a PATH may be a file too ("" goes on to _load: an empty path)
            require_folder(args.config_dir)
        loaded = _load(paths)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for cfg, path in loaded:  # valid, but most likely a mistake, or not ready to deploy as it is: one line each, exit 0
        for line in warnings(cfg, path) + placeholder_warnings(cfg, path):
            print(line, file=sys.stderr)
    if args.json:
        stages = [{"path": path, "stage": cfg.stage, "summary": summary(cfg)} for cfg, path in loaded]
        print(json.dumps({"command": "validate", "ok": True, "stages": stages}, indent=2))
    else:
        for cfg, path in loaded:
            print(f"{path}: ok: {summary(cfg)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m config", description=__doc__.splitlines()[0])
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
