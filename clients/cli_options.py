"""The options the commands share: `--stage` and `--config-dir`, and the loading of the stage they name (a
stage file that does not load is its one line on stderr, and the command exits 2); finite number ranges."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from config import CONFIG_DIR, ConfigError, StageConfig, load_stages

STAGE_HELP = "stage name (config/<stage>.yaml)"


def add_stage(parser, text: str = STAGE_HELP, required: bool = True) -> None:
    """`--stage NAME`; `parser` may be an argument group (bench's mutually exclusive forms)."""
    parser.add_argument("--stage", required=required, help=text)


def add_config_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")


def add_stage_options(parser: argparse.ArgumentParser) -> None:
    add_stage(parser)
    add_config_dir(parser)


def load_stage(args: argparse.Namespace) -> StageConfig | None:
    """The stage `--stage` names, from `--config-dir`; None once its error is printed (the caller exits 2)."""
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    return cfg


def number(kind: type, low: float, high: float, unit: str = "") -> Callable[[str], float]:
    """An argparse type: a finite `kind` (int or float) from `low` to `high`. Anything else (inf, nan, -1,
    1e400, "ten", a 5000-digit integer) is argparse's one-line error and exit 2: a timeout of inf or nan
    would otherwise reach time.sleep or a deadline as a crash or a wait that never ends."""
    what = "an integer" if kind is int else "a number"
    allowed = f"allowed: {what} from {low:g} to {high:g}" + (f" {unit}" if unit else "")

    def parse(text: str):
        try:
            value = kind(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {what} ({allowed})") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"{_shown(text)} ({allowed})")
        return value

    parse.__name__ = kind.__name__
    return parse


def _shown(text: str) -> str:
    text = text if len(text) <= 40 else text[:40] + "..."
    return text if text.isprintable() and text.strip() == text and text else repr(text)
