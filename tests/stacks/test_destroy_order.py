"""`cdk destroy` of a cluster stack, in the order CloudFormation deletes it: derived from the synthesized
template alone. A resource is deleted before every resource it depends on, explicitly (DependsOn) or by
reference (Ref, Fn::GetAtt, Fn::Sub): "Resource A is deleted before resource B" when A refers to B
(CloudFormation Template Reference, DependsOn attribute, aws-attribute-dependson.html). So X is always
deleted before Y exactly when Y is reachable from X over those edges; the destroy order is the reverse of a
topological order of them.

What must hold: the CloudWatch add-on (Fluent Bit, the agents) is gone before any of its log groups is
deleted (or, with auto_create_group, it recreates one and the next deploy fails on an existing group); the
verify runner's source bucket is emptied before CloudFormation deletes it (a versioned bucket with objects
cannot be deleted)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from config.topology import CLOUDWATCH_OBSERVABILITY_ADDON

STAGES = ("dev", "prod")
AUTO_DELETE = "Custom::S3AutoDeleteObjects"


def _references(value: Any) -> Iterator[str]:
    """Logical ids named by Ref, Fn::GetAtt (list or "Id.Attr") and Fn::Sub (${Id} / ${Id.Attr}) in a value."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt":
                yield inner[0] if isinstance(inner, list) else inner.split(".")[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                yield from (m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text))
                if isinstance(inner, list):
                    yield from _references(inner[1])
            else:
                yield from _references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _references(inner)


def dependencies(template: dict) -> dict[str, set[str]]:
    """Each resource's direct dependencies inside the template (pseudo parameters and imports left out)."""
    resources = template["Resources"]
    graph = {}
    for name, resource in resources.items():
        explicit = resource.get("DependsOn", [])
        explicit = [explicit] if isinstance(explicit, str) else explicit
        named = set(explicit) | set(_references({k: v for k, v in resource.items() if k != "DependsOn"}))
        graph[name] = {d for d in named if d in resources and d != name}
    return graph


def destroy_order(graph: dict[str, set[str]]) -> list[str]:
    """Reverse topological order (Kahn's algorithm, ties by name): dependents first. Fails on a cycle."""
    dependents: dict[str, set[str]] = {name: set() for name in graph}
    for name, needs in graph.items():
        for need in needs:
            dependents[need].add(name)
    waiting = {name: len(needs) for name, needs in graph.items()}
    ready = sorted(name for name, count in waiting.items() if count == 0)
    created = []
    while ready:
        name = ready.pop(0)
        created.append(name)
        for dependent in sorted(dependents[name]):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
        ready.sort()
    assert len(created) == len(graph), f"dependency cycle among {sorted(set(graph) - set(created))}"
    return created[::-1]


def always_deleted_before(graph: dict[str, set[str]], first: str, then: str) -> bool:
    """True when `then` is reachable from `first`: in every order CloudFormation may choose, `first` is
    deleted before `then`."""
    seen, stack = set(), [first]
    while stack:
        for need in graph[stack.pop()]:
            if need == then:
                return True
            if need not in seen:
                seen.add(need)
                stack.append(need)
    return False


def _cluster(app_synth, stage):
    template = app_synth.template(stage, "cluster")
    graph = dependencies(template)
    return template["Resources"], graph, destroy_order(graph)


@pytest.mark.parametrize("stage", STAGES)
def test_the_cloudwatch_addon_is_deleted_before_each_of_its_log_groups(app_synth, stage):
    resources, graph, order = _cluster(app_synth, stage)
    (addon,) = [
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == CLOUDWATCH_OBSERVABILITY_ADDON
    ]
    groups = [
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::Logs::LogGroup"
        and "/aws/containerinsights/" in str(r["Properties"].get("LogGroupName", ""))
    ]
    assert len(groups) == 5
    for group in groups:
        assert always_deleted_before(graph, addon, group), f"{addon} may outlive {group} in a destroy"
        assert order.index(addon) < order.index(group)
        assert resources[group]["DeletionPolicy"] == "Delete"  # the stack owns it: destroy removes it


@pytest.mark.parametrize("stage", STAGES)
def test_the_runner_bucket_is_emptied_before_it_is_deleted(app_synth, stage):
    resources, graph, order = _cluster(app_synth, stage)
    (bucket,) = [n for n, r in resources.items() if r["Type"] == "AWS::S3::Bucket"]
    assert resources[bucket]["DeletionPolicy"] == "Delete"
    assert resources[bucket]["Properties"]["VersioningConfiguration"] == {"Status": "Enabled"}
    emptiers = [
        n for n, r in resources.items() if r["Type"] == AUTO_DELETE and r["Properties"]["BucketName"] == {"Ref": bucket}
    ]
    assert len(emptiers) == 1, f"no {AUTO_DELETE} empties {bucket}: a destroy after verify-remote fails on it"
    (emptier,) = emptiers
    assert always_deleted_before(graph, emptier, bucket)
    assert order.index(emptier) < order.index(bucket)
    # The handler empties only a bucket tagged for it (aws-cdk-lib 2.275.0 custom-resource-handlers/dist/
    # aws-s3/auto-delete-objects-handler/index.js), and must still exist, with its permission, when its
    # Delete runs: its function (the ServiceToken) and the bucket policy that grants its role outlive it.
    tags = {t["Key"]: t["Value"] for t in resources[bucket]["Properties"]["Tags"]}
    assert tags["aws-cdk:auto-delete-objects"] == "true"
    handler = resources[emptier]["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    (policy,) = [
        n
        for n, r in resources.items()
        if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": bucket}
    ]
    role = resources[handler]["Properties"]["Role"]["Fn::GetAtt"][0]
    granted = [
        s
        for s in resources[policy]["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and s["Principal"] == {"AWS": {"Fn::GetAtt": [role, "Arn"]}}
    ]
    assert granted and {"s3:DeleteObject*", "s3:List*"} <= set(granted[0]["Action"])
    for needed in (handler, policy, role):
        assert always_deleted_before(graph, emptier, needed), f"{needed} may be gone before {emptier} runs"


def test_the_graph_reads_every_reference_form():
    template = {
        "Resources": {
            "A": {
                "Type": "X",
                "DependsOn": "B",
                "Properties": {
                    "p": {"Fn::GetAtt": ["C", "Arn"]},
                    "q": {"Fn::Sub": "${D.Arn}/${AWS::Region}"},
                    "r": {"Fn::Sub": ["${x}", {"x": {"Ref": "E"}}]},
                    "s": {"Fn::GetAtt": "F.Arn"},
                },
            },
            **{name: {"Type": "X"} for name in "BCDEF"},
        }
    }
    graph = dependencies(template)
    assert graph["A"] == set("BCDEF")
    order = destroy_order(graph)
    assert order[0] == "A" and all(always_deleted_before(graph, "A", n) for n in "BCDEF")
    assert not always_deleted_before(graph, "B", "A")
