"""A Stack whose availability zones come from the stage file, never from a context lookup."""
from __future__ import annotations

from typing import Sequence

import aws_cdk as cdk
from constructs import Construct


class FixedZonesStack(cdk.Stack):
    """With an explicit account and region, Stack.availability_zones would look the AZs up in AWS
    (and fail without credentials). The stage file names them, so synth and diff need no AWS access."""

    def __init__(self, scope: Construct, construct_id: str, *, zones: Sequence[str], **kwargs) -> None:
        self._zones = list(zones)
        super().__init__(scope, construct_id, **kwargs)

    @property
    def availability_zones(self) -> list[str]:
        return self._zones
