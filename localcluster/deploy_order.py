"""What a deploy applies to the cluster, in the order CloudFormation applies it, read from a synthesized
cloud assembly: never a hand-written list.

Stacks deploy in the order of the assembly manifest's dependencies; inside a stack, CloudFormation
creates a resource only after every resource it names in DependsOn, Ref or Fn::GetAtt. Of those resources
the ones that change the cluster's objects are the kubectl provider's manifests
(Custom::AWSCDK-EKS-KubernetesResource, whose Manifest property is the JSON list kubectl applies), its Helm
releases (Custom::AWSCDK-EKS-HelmChart) and EKS add-ons (AWS::EKS::Addon). Ties (resources CloudFormation
may create in parallel) keep the template's order, so the order is deterministic."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
ADDON = "AWS::EKS::Addon"
CRDS = "Custom::KubeRayCrds"  # stacks/kuberay_crds.py: a chart's crds/, applied server-side
APPLIED_TYPES = (MANIFEST, HELM_CHART, ADDON, CRDS)


class AssemblyError(Exception):
    """One line: the assembly cannot be read as a deploy (a cycle, a missing stack, a manifest that is not JSON)."""


@dataclass(frozen=True)
class Step:
    stack: str
    logical_id: str
    type: str
    objects: tuple = ()  # manifest: the objects kubectl applies
    prune_label: str | None = None  # manifest: the label its Update prunes by (`kubectl apply --prune -l`)
    helm: dict[str, Any] | None = None  # Helm release: chart, version, repository, release, namespace, values
    addon: str | None = None  # EKS add-on name
    crds: dict[str, Any] | None = None  # a chart's CRDs: chart, repository, version

    @property
    def label(self) -> str:
        if self.crds:
            return f"CRDs of {self.crds['chart']} {self.crds['version']}"
        if self.helm:
            return f"Helm release {self.helm['release']} ({self.helm['chart']} {self.helm['version']})"
        if self.addon:
            return f"EKS add-on {self.addon}"
        kinds = ", ".join(f"{o['kind']}/{o['metadata']['name']}" for o in self.objects)
        return f"manifest {self.logical_id}: {kinds}"


def _references(value: Any) -> set[str]:
    """Every logical ID that `value` names with Ref or Fn::GetAtt."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str) and not inner.startswith("AWS::"):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".", 1)[0]
                found.add(target)
            else:
                found |= _references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= _references(inner)
    return found


def _ordered(names: list[str], edges: dict[str, set[str]], what: str) -> list[str]:
    """Kahn's order: each name after the names it depends on, ties in the given order."""
    position = {name: index for index, name in enumerate(names)}
    remaining = {name: {d for d in edges.get(name, set()) if d in position} for name in names}
    order: list[str] = []
    while remaining:
        ready = sorted((n for n, deps in remaining.items() if not deps), key=position.__getitem__)
        if not ready:
            raise AssemblyError(f"{what} depend on each other in a cycle: {', '.join(sorted(remaining))}")
        first = ready[0]
        order.append(first)
        del remaining[first]
        for deps in remaining.values():
            deps.discard(first)
    return order


def stack_order(assembly: Path) -> list[tuple[str, Path]]:
    """(artifact id, template path) of every stack in the assembly folder, in deploy order."""
    try:
        manifest = json.loads((assembly / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise AssemblyError(f"{assembly / 'manifest.json'}: not a cloud assembly manifest ({exc})") from None
    stacks = {
        name: artifact
        for name, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }
    edges = {name: set(artifact.get("dependencies") or []) for name, artifact in stacks.items()}
    order = _ordered(list(stacks), edges, "the stacks")
    return [(name, assembly / stacks[name]["properties"]["templateFile"]) for name in order]


def _resource_order(resources: dict[str, Any]) -> list[str]:
    names = list(resources)
    edges = {}
    for name, resource in resources.items():
        depends = resource.get("DependsOn") or []
        edges[name] = set([depends] if isinstance(depends, str) else depends) | _references(resource.get("Properties"))
    return _ordered(names, edges, "resources")


def _step(stack: str, logical_id: str, resource: dict[str, Any]) -> Step:
    props = resource.get("Properties") or {}
    kind = resource["Type"]
    if kind == MANIFEST:
        manifest = props.get("Manifest")
        try:
            objects = json.loads(manifest) if isinstance(manifest, str) else None
        except ValueError:
            objects = None
        if not isinstance(objects, list):
            raise AssemblyError(
                f"{stack}/{logical_id}: its Manifest is not a JSON list of objects (a value only known at deploy time?)"
            )
        return Step(stack, logical_id, kind, objects=tuple(objects), prune_label=props.get("PruneLabel"))
    if kind == HELM_CHART:
        values = props.get("Values")
        return Step(
            stack,
            logical_id,
            kind,
            helm={
                "chart": props.get("Chart"),
                "version": props.get("Version"),
                "repository": props.get("Repository"),
                "release": props.get("Release"),
                "namespace": props.get("Namespace") or "default",
                "create_namespace": props.get("CreateNamespace") in (True, "true"),
                "wait": props.get("Wait") in (True, "true"),
                "timeout": props.get("Timeout"),
                "values": json.loads(values) if isinstance(values, str) and values else {},
            },
        )
    if kind == CRDS:
        crds = {"chart": props.get("Chart"), "repository": props.get("Repository"), "version": props.get("Version")}
        return Step(stack, logical_id, kind, crds=crds)
    return Step(stack, logical_id, kind, addon=props.get("AddonName"))


def steps(assembly: Path) -> list[Step]:
    """Everything the stage's deploy applies to the cluster, in deploy order."""
    found: list[Step] = []
    for stack, template_path in stack_order(assembly):
        template = json.loads(template_path.read_text())
        resources = template.get("Resources") or {}
        for logical_id in _resource_order(resources):
            if resources[logical_id].get("Type") in APPLIED_TYPES:
                found.append(_step(stack, logical_id, resources[logical_id]))
    return found


def objects(found: Iterable[Step]) -> list[dict[str, Any]]:
    """The manifests' objects, in the order the steps apply them."""
    return [obj for step in found for obj in step.objects]
