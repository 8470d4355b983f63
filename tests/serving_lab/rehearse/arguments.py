"""The arguments `ops rehearse` runs with, as its real parser reads them (a test sets only what it changes, and
an option the parser does not have fails here instead of passing unnoticed), and one PD rehearsal run with them."""

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


def rehearse_pd(cfg, args: argparse.Namespace, *, host, tmp_path: Path, model: Path | None = None, say=None):
    """`cli.rehearse_mode` of `cfg` in PD mode with dummy weights, results in TMP/out, no time budget; `say`
    collects the console lines (default: dropped)."""
    from serving_lab.rehearse import cli

    if model is None:
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
    return cli.rehearse_mode(
        cfg,
        args,
        mode="pd",
        host=host,
        model=model,
        real_weights=False,
        out=tmp_path / "out",
        deadline=None,
        say=say or (lambda line: None),
    )
