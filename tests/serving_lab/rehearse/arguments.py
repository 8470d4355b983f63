"""The arguments `ops rehearse` runs with, as its real parser reads them: a test sets only what it changes, and
an option the parser does not have fails here instead of passing unnoticed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def rehearse_args(tmp_path: Path, **changed: Any) -> argparse.Namespace:
    """`python -m ops rehearse --stage dev --mode pd --deploy-timeout 5 --out TMP/out`, then `changed` set."""
    from ops.__main__ import _parser

    argv = ["rehearse", "--stage", "dev", "--mode", "pd", "--deploy-timeout", "5", "--out", str(tmp_path / "out")]
    args = _parser(argv=argv).parse_args(argv)
    for name, value in changed.items():
        assert hasattr(args, name), f"ops rehearse has no option for {name!r}"
        setattr(args, name, value)
    return args
