"""boto3 clients of one session and region, made once each; tests put moto's or botocore Stubbers in
`overrides`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3


@dataclass
class Clients:
    session: boto3.session.Session
    region: str
    overrides: dict[str, Any] = field(default_factory=dict)
    _made: dict[str, Any] = field(default_factory=dict)

    def __call__(self, service: str):
        if service in self.overrides:
            return self.overrides[service]
        if service not in self._made:
            self._made[service] = self.session.client(service, region_name=self.region)
        return self._made[service]
