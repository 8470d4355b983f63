"""The stage options every stage command shares, and the loading of the stage they name."""

from __future__ import annotations

import argparse

from config import CONFIG_DIR
from config.stage_options import add_stage_options, load_stage


def test_the_options_and_their_defaults():
    parser = argparse.ArgumentParser()
    add_stage_options(parser)
    args = parser.parse_args(["--stage", "dev"])
    assert (args.stage, args.config_dir) == ("dev", str(CONFIG_DIR))


def test_a_stage_that_loads(tmp_path):
    args = argparse.Namespace(stage="dev", config_dir=str(CONFIG_DIR))
    cfg = load_stage(args)
    assert cfg is not None and cfg.stage == "dev"


def test_a_stage_that_does_not_load_is_one_line_and_none(tmp_path, capsys):
    assert load_stage(argparse.Namespace(stage="nope", config_dir=str(tmp_path))) is None
    err = capsys.readouterr().err
    assert err.strip() and len(err.strip().splitlines()) == 1
