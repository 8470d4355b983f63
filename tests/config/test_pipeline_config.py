"""The pipeline file's derived values (config/pipeline.py)."""

from __future__ import annotations

import pytest

from config.pipeline import PipelineConfig


@pytest.mark.parametrize(
    ("service", "action"),
    [
        ("codeconnections", "codeconnections:UseConnection"),
        ("codestar-connections", "codestar-connections:UseConnection"),
    ],
)
def test_the_connection_is_used_under_its_arns_own_service_prefix(service, action):
    arn = f"arn:aws:{service}:us-west-2:123456789012:connection/00000000-0000-0000-0000-000000000000"
    cfg = PipelineConfig(region="us-west-2", connection_arn=arn, repository="o/r", stages=[{"name": "dev"}])
    assert cfg.connection_action == action
