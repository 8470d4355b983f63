"""What a stack's change means for the running cluster that its CloudFormation diff does not say, read from
the templates of both sides: the nodegroups a Kubernetes upgrade leaves on the old kubelet (a manual step),
who gains or loses access to the cluster (an access entry's principal, its account and its access), and the
nodes a scale-in lets EKS choose."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .danger import minor

CLUSTER, NODEGROUP, ACCESS_ENTRY = "AWS::EKS::Cluster", "AWS::EKS::Nodegroup", "AWS::EKS::AccessEntry"
UPGRADE_DOC = "docs/OPERATIONS.md, Upgrading Kubernetes"


@dataclass(frozen=True)
class TemplateNotes:
    manual: list[str] = field(default_factory=list)  # steps after the deploy
    notes: list[str] = field(default_factory=list)  # what to know before it


def read(before: dict, after: dict, account: str | None) -> TemplateNotes:
    """The notes of one stack; `account`: the one the stage names (None: the deploying credentials')."""
    return TemplateNotes(
        manual=nodegroups_behind(before, after),
        notes=access_changes(before, after, account) + scale_ins(before, after),
    )


def _of_type(template: dict, kind: str) -> dict[str, dict]:
    """{logical ID: properties} of the template's resources of one type."""
    resources = template.get("Resources") or {}
    return {key: res.get("Properties") or {} for key, res in resources.items() if res.get("Type") == kind}


def nodegroups_behind(before: dict, after: dict) -> list[str]:
    """A cluster upgraded in place: EKS changes a managed nodegroup's version only when asked, and aws_eks_v2
    (aws-cdk-lib 2.275) writes no nodegroup `Version`, so the deploy leaves every node on the old kubelet."""
    steps = []
    old_clusters = _of_type(before, CLUSTER)
    for cluster_id, props in sorted(_of_type(after, CLUSTER).items()):
        old, new = (old_clusters.get(cluster_id) or {}).get("Version"), props.get("Version")
        old_minor, new_minor = minor(old), minor(new)
        if old_minor is None or new_minor is None or new_minor <= old_minor:
            continue
        behind = sorted(
            ng
            for ng, group in _of_type(after, NODEGROUP).items()
            if group.get("ClusterName") == {"Ref": cluster_id} and group.get("Version") != new
        )
        name = props.get("Name") if isinstance(props.get("Name"), str) else "CLUSTER"
        if behind:
            steps.append(
                f"Kubernetes {old} -> {new}: the nodegroups {', '.join(behind)} stay on {old}'s kubelet (the "
                f"template sets no nodegroup version). After the deploy, for each NAME of `aws eks list-nodegroups "
                f"--cluster-name {name}`, run `aws eks update-nodegroup-version --cluster-name {name} "
                f"--nodegroup-name NAME --kubernetes-version {new}`: every node is replaced, a GPU node's engine "
                f"is down until its pod runs again ({UPGRADE_DOC})"
            )
    return steps


def _principal(props: dict) -> str:
    """The principal's ARN as written, or the role of this stack that it names."""
    arn = props.get("PrincipalArn")
    if isinstance(arn, str):
        return arn
    target = arn.get("Fn::GetAtt") if isinstance(arn, dict) else None
    return f"role {target[0]} of this stack" if isinstance(target, list) else json.dumps(arn)


def _literal(value: object) -> str:
    """The text of a string, or of the string parts of an Fn::Join (a policy ARN with its partition)."""
    if isinstance(value, dict) and isinstance(value.get("Fn::Join"), list):
        return "".join(part for part in value["Fn::Join"][1] if isinstance(part, str))
    return str(value)


def _access(props: dict) -> str:
    """The access an entry grants: each policy with its scope, and its Kubernetes groups."""
    parts = []
    for policy in props.get("AccessPolicies") or []:
        scope = policy.get("AccessScope") or {}
        namespaces = f" {', '.join(scope['Namespaces'])}" if scope.get("Namespaces") else ""
        parts.append(f"{_literal(policy.get('PolicyArn')).rsplit('/', 1)[-1]} ({scope.get('Type')}{namespaces} scope)")
    if props.get("KubernetesGroups"):
        parts.append(f"Kubernetes groups {', '.join(props['KubernetesGroups'])}")
    return "; ".join(parts) or "no access policy or Kubernetes group"


def _account(principal: str, account: str | None) -> str:
    """What the principal's account is to the stage's: said only when it is another, or cannot be compared."""
    parts = principal.split(":")
    if not principal.startswith("arn:") or len(parts) < 5 or parts[4] == account:
        return ""
    if account is None:
        return f"; the stage sets no account: check that {parts[4]} is the one it deploys to"
    return f"; account {parts[4]} is not the stage's ({account})"


def access_changes(before: dict, after: dict, account: str | None) -> list[str]:
    """Access entries by principal (an index-named entry may change its principal): added, removed, changed."""
    old = {_principal(p): _access(p) for p in _of_type(before, ACCESS_ENTRY).values()}
    new = {_principal(p): _access(p) for p in _of_type(after, ACCESS_ENTRY).values()}
    notes = []
    for principal in sorted(set(old) | set(new)):
        was, now = old.get(principal), new.get(principal)
        if was is None:
            notes.append(f"cluster access added: {principal} gets {now}{_account(principal, account)}")
        elif now is None:
            notes.append(f"cluster access removed: {principal} loses {was}")
        elif was != now:
            notes.append(f"cluster access changed: {principal}: {was} -> {now}{_account(principal, account)}")
    return notes


def _desired(props: dict) -> int | None:
    size = (props.get("ScalingConfig") or {}).get("DesiredSize")
    return size if isinstance(size, int) else None


def scale_ins(before: dict, after: dict) -> list[str]:
    """A nodegroup's desired size lowered: its Auto Scaling group's termination policy picks the nodes."""
    notes = []
    old_groups = _of_type(before, NODEGROUP)
    for group_id, props in sorted(_of_type(after, NODEGROUP).items()):
        old, new = _desired(old_groups.get(group_id) or {}), _desired(props)
        if old is None or new is None or new >= old:
            continue
        role = (props.get("Labels") or {}).get("role")
        named = f"{group_id} (role={role})" if role else group_id
        notes.append(
            f"nodegroup {named}: {old} -> {new} node(s): EKS, not you, picks which {old - new} node(s) it "
            f"terminates (the Auto Scaling group's termination policy), perhaps ones running a live engine, "
            f"which then stops (its requests in flight fail)"
        )
    return notes
