"""The deploy order is read from the synthesized assembly (stack dependencies, DependsOn, Ref, GetAtt)."""

from __future__ import annotations

import json

import pytest

from localcluster import deploy_order
from localcluster.deploy_order import ADDON, HELM_CHART, MANIFEST, AssemblyError


def labels(steps):
    return [
        f"crds:{s.crds['chart']}"
        if s.crds
        else s.helm["release"]
        if s.helm
        else s.addon or s.objects[0]["kind"] + "/" + s.objects[0]["metadata"]["name"]
        for s in steps
    ]


def test_the_operator_namespace_comes_before_the_operator_and_the_serving_objects_come_last(dev_steps):
    order = labels(dev_steps)
    assert order.index("Namespace/kuberay-system") < order.index("kuberay-operator")
    assert order.index("crds:kuberay-operator") < order.index("kuberay-operator")
    assert order[-1] == "Namespace/inference"  # the serving stack's one manifest, first object the namespace
    assert dev_steps[-1].stack.startswith("devServing")
    assert all(s.stack.startswith("devCluster") for s in dev_steps[:-1])


def test_every_helm_release_and_addon_of_the_cluster_stack_is_a_step(dev_steps):
    assert {s.helm["release"] for s in dev_steps if s.type == HELM_CHART} == {
        "nvidia-device-plugin",
        "aws-efa-k8s-device-plugin",
        "kuberay-operator",
    }
    assert {s.addon for s in dev_steps if s.type == ADDON} == {
        "vpc-cni",
        "eks-pod-identity-agent",
        "amazon-cloudwatch-observability",
    }


def test_the_serving_manifest_holds_the_chart_objects_in_render_order(dev_steps, dev_assembly):
    serving = [s for s in dev_steps if s.type == MANIFEST][-1]
    kinds = [o["kind"] for o in serving.objects]
    assert kinds[0] == "Namespace" and "RayService" in kinds
    assert kinds.index("ServiceAccount") < kinds.index("RayService")


def _assembly(tmp_path, stacks: dict, resources: dict):
    artifacts = {}
    for name, deps in stacks.items():
        (tmp_path / f"{name}.template.json").write_text(json.dumps({"Resources": resources.get(name, {})}))
        artifacts[name] = {
            "type": "aws:cloudformation:stack",
            "dependencies": deps,
            "properties": {"templateFile": f"{name}.template.json"},
        }
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": artifacts}))
    return tmp_path


def _manifest(name, **extra):
    return {
        "Type": MANIFEST,
        "Properties": {
            "Manifest": json.dumps([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}]),
            **extra.pop("props", {}),
        },
        **extra,
    }


def test_stacks_deploy_after_their_dependencies_whatever_the_manifest_order(tmp_path):
    folder = _assembly(
        tmp_path,
        {"Serving": ["Cluster"], "Cluster": []},
        {"Serving": {"B": _manifest("b")}, "Cluster": {"A": _manifest("a")}},
    )
    assert [s.objects[0]["metadata"]["name"] for s in deploy_order.steps(folder)] == ["a", "b"]


def test_a_resource_comes_after_what_it_names_by_depends_on_ref_or_getatt(tmp_path):
    resources = {
        "First": _manifest("first", DependsOn=["Second"]),
        "Second": _manifest("second", props={"ServiceToken": {"Fn::GetAtt": ["Third", "Arn"]}}),
        "Third": _manifest("third", props={"Other": {"Ref": "Fourth"}}),
        "Fourth": _manifest("fourth"),
    }
    folder = _assembly(tmp_path, {"S": []}, {"S": resources})
    assert [s.objects[0]["metadata"]["name"] for s in deploy_order.steps(folder)] == [
        "fourth",
        "third",
        "second",
        "first",
    ]


def test_a_dependency_cycle_is_one_line(tmp_path):
    folder = _assembly(
        tmp_path, {"S": []}, {"S": {"A": _manifest("a", DependsOn="B"), "B": _manifest("b", DependsOn="A")}}
    )
    with pytest.raises(AssemblyError, match="cycle: A, B"):
        deploy_order.steps(folder)


def test_a_manifest_known_only_at_deploy_time_is_refused(tmp_path):
    folder = _assembly(
        tmp_path,
        {"S": []},
        {"S": {"A": {"Type": MANIFEST, "Properties": {"Manifest": {"Fn::Join": ["", ["[", {"Ref": "X"}, "]"]]}}}}},
    )
    with pytest.raises(AssemblyError, match="not a JSON list"):
        deploy_order.steps(folder)
