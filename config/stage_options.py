"""The options the stage commands share: `--stage` and `--config-dir`, and the loading of the stage they name (a
stage file that does not load is its one line on stderr, and the command exits 2)."""

from __future__ import annotations

import argparse
import sys

from .errors import ConfigError
from .loader import CONFIG_DIR, load_stages
from .schema import StageConfig


def add_stage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stage", required=True, help="stage name (config/<stage>.yaml)")
    parser.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")


def load_stage(args: argparse.Namespace) -> StageConfig | None:
    """The stage `--stage` names, from `--config-dir`; None once its error is printed (the caller exits 2)."""
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    return cfg
