"""Danger classification: which resource changes are destructive or refused (listed first, and what
--fail-on-danger fails on), and how a change is described in one line."""

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
    refused: str = ""  # why AWS refuses the change: the deploy fails and CloudFormation rolls the stack back

    @property
    def dangerous(self) -> bool:
        if self.action == "nodes-replaced" or self.refused:
            return True
        return self.type in DANGEROUS_TYPES and self.action in ("replaced", "removed")

    def describe(self) -> str:
        what = DANGEROUS_TYPES.get(self.type, self.type)
        reason = f" ({', '.join(self.because)})" if self.because else ""
        if self.refused:
            return f"{what} {self.logical_id}: {self.refused}"
        if self.action == "nodes-replaced":
            return f"{what} {self.logical_id}: every node is replaced (rolling){reason}"
        return f"{what} {self.logical_id} {self.action}{reason}"


def minor(version: object) -> tuple[int, int] | None:
    """(1, 35) of a cluster's `Version` "1.35"; None for what is not MAJOR.MINOR (a token)."""
    parts = str(version).split(".")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1])


def version_refusal(before: object, after: object) -> str:
    """Why EKS refuses a cluster's Kubernetes version change ('' when it takes it): UpdateClusterVersion
    goes one minor up at a time and never down."""
    old, new = minor(before), minor(after)
    if old is None or new is None or new == old or new == (old[0], old[1] + 1):
        return ""
    if new < old:
        return f"EKS cannot downgrade a cluster (Kubernetes {before} -> {after}): the deploy fails and rolls back"
    return (
        f"EKS upgrades a cluster one minor version at a time (Kubernetes {before} -> {after}): the deploy fails "
        f"and rolls back; deploy each minor in between first"
    )
