"""The readable Kubernetes YAML each synth writes under cdk.out/k8s/<stage>/, snapshotted so reviewers
see every change to what is applied. Regenerate after an intended change with:
    UPDATE_SNAPSHOTS=1 scripts/test.sh tests/charts/test_render.py
"""

from __future__ import annotations

import os

import pytest
import yaml

from charts import render
from config import versions

from ..helpers import ROOT

SNAPSHOTS = ROOT / "tests" / "snapshots"
FILES = ["inference.yaml", "serve-config.yaml", "helm-releases.yaml", "eks-addons.yaml"]


@pytest.fixture(scope="module")
def rendered(app_synth, tmp_path_factory):
    out = tmp_path_factory.mktemp("rendered")
    return render.write(out, [stage.rendering() for stage in app_synth.stages.values()])


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("name", FILES)
def test_rendered_yaml_matches_the_snapshot(rendered, stage, name):
    actual = (rendered / stage / name).read_text()
    snapshot = SNAPSHOTS / stage / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(actual)
    assert snapshot.exists(), f"no snapshot {snapshot}: run with UPDATE_SNAPSHOTS=1"
    assert actual == snapshot.read_text(), f"{stage}/{name} changed: review it, then UPDATE_SNAPSHOTS=1"


def test_serve_config_is_a_readable_block_not_an_escaped_string(rendered):
    text = (rendered / "dev" / "inference.yaml").read_text()
    assert "  serveConfigV2: |\n    applications:\n" in text


def test_helm_releases_list_chart_version_and_values(rendered):
    releases = list(yaml.safe_load_all((rendered / "dev" / "helm-releases.yaml").read_text()))
    assert [(r["release"], r["chart"], r["version"]) for r in releases] == [
        ("nvidia-device-plugin", "nvidia-device-plugin", "0.20.0"),
        ("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", "v0.5.30"),
        ("kuberay-operator", "kuberay-operator", "1.6.2"),
    ]
    assert ["crds" in r for r in releases] == [False, False, True]  # the KubeRayCrds step's note
    assert all("values" in r and "repository" in r and "namespace" in r for r in releases)


def test_eks_addons_list_name_stack_and_version(rendered):
    addons = list(yaml.safe_load_all((rendered / "dev" / "eks-addons.yaml").read_text()))
    unpinned = "not pinned: EKS picks it when the add-on is created"
    assert [(a["addon"], a["stack"], a["version"]) for a in addons] == [
        ("vpc-cni", "dev-cluster", unpinned),
        ("eks-pod-identity-agent", "dev-cluster", unpinned),
        ("amazon-cloudwatch-observability", "dev-cluster", versions.CLOUDWATCH_OBSERVABILITY_VERSION),
    ]


def test_rendered_objects_equal_what_the_manifest_applies(app_synth, rendered):
    import json

    (manifest,) = app_synth.resources("dev", "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
    applied = json.loads(manifest["Properties"]["Manifest"])
    for obj in applied:  # the kubectl provider's prune label is the only addition
        obj["metadata"]["labels"] = {
            k: v for k, v in obj["metadata"].get("labels", {}).items() if not k.startswith("aws.cdk.eks/prune-")
        } or None
        if obj["metadata"]["labels"] is None:
            del obj["metadata"]["labels"]
    assert applied == list(yaml.safe_load_all((rendered / "dev" / "inference.yaml").read_text()))


def test_rewrite_replaces_the_stages_it_writes_and_keeps_the_others(tmp_path, app_synth):
    stages = [stage.rendering() for stage in app_synth.stages.values()]
    render.write(tmp_path, stages)
    (tmp_path / "k8s" / "dev" / "stale.yaml").write_text("{}\n")
    render.write(tmp_path, stages[:1])
    assert sorted(p.name for p in (tmp_path / "k8s").iterdir()) == ["dev", "prod"]
    assert sorted(p.name for p in (tmp_path / "k8s" / "dev").iterdir()) == sorted(stages[0].files())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".k8s-")]
