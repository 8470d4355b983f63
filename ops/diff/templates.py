"""The template diff: the resource changes between two CloudFormation templates of one stack (added,
removed, changed, replaced; a Kubernetes version change EKS refuses), and the nodegroups whose nodes a launch
template change rolls."""

from __future__ import annotations

from typing import Any

from .danger import ResourceChange, version_refusal
from .schemas import create_only


def _pointer(properties: dict, path: str) -> Any:
    current: Any = properties
    for part in path.split("/"):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def _changed(logical_id: str, before: dict, after: dict) -> ResourceChange:
    """A resource in both templates that differs: replaced when a create-only property (or the type) changes."""
    if before["Type"] != after["Type"]:
        return ResourceChange(logical_id, after["Type"], "replaced", ["Type"])
    props_before, props_after = before.get("Properties", {}), after.get("Properties", {})
    because = [p for p in create_only(after["Type"]) if _pointer(props_before, p) != _pointer(props_after, p)]
    refused = ""
    if after["Type"] == "AWS::EKS::Cluster":
        refused = version_refusal(props_before.get("Version"), props_after.get("Version"))
    return ResourceChange(logical_id, after["Type"], "replaced" if because else "changed", because, refused)


def resource_changes(old: dict, new: dict) -> list[ResourceChange]:
    old_res, new_res = old.get("Resources", {}), new.get("Resources", {})
    changes = []
    for logical_id in sorted(set(old_res) | set(new_res)):
        before, after = old_res.get(logical_id), new_res.get(logical_id)
        if before is None:
            changes.append(ResourceChange(logical_id, after["Type"], "added"))
        elif after is None:
            changes.append(ResourceChange(logical_id, before["Type"], "removed"))
        elif before != after:
            changes.append(_changed(logical_id, before, after))
    # A launch template change rolls every node of the nodegroups that use it (a new template version).
    for change in list(changes):
        if change.type != "AWS::EC2::LaunchTemplate" or change.action != "changed":
            continue
        for logical_id, res in new_res.items():
            uses_it = res["Type"] == "AWS::EKS::Nodegroup" and res.get("Properties", {}).get("LaunchTemplate", {}).get(
                "Id"
            ) == {"Ref": change.logical_id}
            if uses_it and not any(c.logical_id == logical_id and c.action == "replaced" for c in changes):
                changes.append(
                    ResourceChange(logical_id, res["Type"], "nodes-replaced", [f"launch template {change.logical_id}"])
                )
    return changes
