"""Build every stage into a CDK app, with cdk-nag and its acknowledgments: shared by app.py and tests."""
from __future__ import annotations

from typing import Iterable

import aws_cdk as cdk

from config.schema import StageConfig

from . import compliance
from .stage import InferenceStage


def build(app: cdk.App, stages: Iterable[StageConfig]) -> list[InferenceStage]:
    built = [InferenceStage(app, cfg.stage, cfg=cfg) for cfg in stages]
    compliance.enable_checks(app)
    for stage in built:
        compliance.acknowledge_findings(stage.cluster)
    return built
