"""Option types the commands share: finite number ranges (the stage options: config/stage_options.py)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


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
