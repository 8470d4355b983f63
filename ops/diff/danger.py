"""Danger classification: which resource changes are destructive (listed first, and what --fail-on-danger
fails on), and how a change is described in one line."""

from __future__ import annotations

from dataclasses import dataclass, field

DANGEROUS_TYPES = {
    "AWS::EKS::Cluster": "cluster",
    "AWS::EKS::Nodegroup": "nodegroup",
    "AWS::EC2::VPC": "VPC",
    "AWS::KMS::Key": "KMS key",
}


@dataclass
class ResourceChange:
    logical_id: str
    type: str
    action: str  # added | removed | changed | replaced | nodes-replaced
    because: list[str] = field(default_factory=list)

    @property
    def dangerous(self) -> bool:
        if self.action == "nodes-replaced":
            return True
        return self.type in DANGEROUS_TYPES and self.action in ("replaced", "removed")

    def describe(self) -> str:
        what = DANGEROUS_TYPES.get(self.type, self.type)
        reason = f" ({', '.join(self.because)})" if self.because else ""
        if self.action == "nodes-replaced":
            return f"{what} {self.logical_id}: every node is replaced (rolling){reason}"
        return f"{what} {self.logical_id} {self.action}{reason}"
