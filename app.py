#!/usr/bin/env python3
"""The CDK app: one cdk.Stage per stage file in config/ (or only `-c stage=NAME`).

The only place that reads CDK context. A bad stage file stops here with one line and exit code 2,
before any construct exists, so no half-written cloud assembly is left behind.
"""
from __future__ import annotations

import sys

import aws_cdk as cdk

from config import CONFIG_DIR, ConfigError, load_stages
from stacks.stage import InferenceStage


def main() -> int:
    app = cdk.App(builtin_cloud_formation_validation=False)
    only = app.node.try_get_context("stage")
    config_dir = app.node.try_get_context("config_dir") or CONFIG_DIR
    try:
        stages = load_stages(config_dir, only=only)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    for cfg in stages:
        InferenceStage(app, cfg.stage, cfg=cfg)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
