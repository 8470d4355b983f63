"""An operator bump, on a cluster of its own, with the kubectl layer's Helm 4.1.4. The cluster holds the
previous release's CRDs (KubeRay 1.5.0: ray-operator@v1.5.0's config/crd/bases, the files that release's chart
carries in crds/, as 1.6.2's chart carries its own; the 1.5.0 chart itself is not served, its root module is
refused by the proxy), created as KubeRay's docs install them (`kubectl create`), and a release record. The
deploy then upgrades the release to the stage's 1.6.2: Helm leaves the CRDs at 1.5.0 (an upgrade never reads
crds/); the cluster stack's KubeRayCrds step, run as its handler runs it, brings them to 1.6.2. Before the
record exists, a plain Helm 4 install fails on those CRDs: it applies crds/ server-side without force
(helm.sh/helm/v4 pkg/action/install.go installCRDs), so the stage's release skips them and the step is their
one writer."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from localcluster import helm, session, tools
from localcluster.apply import Applier
from localcluster.control_plane import LocalCluster

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"


def _schemas(folder: Path) -> dict[str, dict]:
    crds = [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("ray.io_*.yaml"))]
    return {c["metadata"]["name"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for c in crds}


def _stored(cluster, names) -> dict[str, dict]:
    api = cluster.api()
    return {n: api.get(CRD_PATH + n)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for n in names}


def _has_upgrade_strategy(schema: dict) -> bool:
    # RayCluster's spec.upgradeStrategy is new in 1.6 (absent from 1.5.0's CRD).
    return "upgradeStrategy" in schema["properties"]["spec"]["properties"]


@pytest.fixture(scope="module")
def previous_crds(box) -> Path:
    return tools.module_dir(tools.KUBERAY_PREVIOUS_CRDS, box.caches) / "config" / "crd" / "bases"


@dataclass(frozen=True)
class Bumped:
    cluster: LocalCluster
    refused_install: str  # Helm's answer to a plain install over the previous CRDs


@pytest.fixture(scope="module")
def bumped(tmp_path_factory, dev_cfg, box, dev_steps, previous_crds):
    """The cluster with the previous release's CRDs and record, after the deploy's plain `helm upgrade`."""
    cluster = session.start(dev_cfg, tmp_path_factory.mktemp("bump"), box)
    try:
        admin = Applier(cluster.api())
        for crd in sorted(previous_crds.glob("ray.io_*.yaml")):
            admin.apply(yaml.safe_load(crd.read_text()), manager="kubectl-create")
        namespace = next(s for s in dev_steps if s.objects and s.objects[0]["kind"] == "Namespace")
        for obj in namespace.objects:
            admin.apply(obj)
        step = next(s for s in dev_steps if s.helm and s.helm["chart"] == "kuberay-operator")
        chart, kubeconfig = box.charts["kuberay-operator"], cluster.kubeconfig()
        plain = helm.Release.of({**copy.deepcopy(step.helm), "skip_crds": False})  # Helm's own CRD handling
        try:
            helm.upgrade_install(box.layer.helm, plain, chart, kubeconfig, cluster.folder)
            refused = ""
        except helm.HelmError as exc:
            refused = str(exc)
        previous = helm.Release.of({**copy.deepcopy(step.helm), "skip_crds": True, "wait": False})
        helm.upgrade_install(box.layer.helm, previous, chart, kubeconfig, cluster.folder)  # the release record
        helm.upgrade_install(box.layer.helm, plain, chart, kubeconfig, cluster.folder)  # the deploy's upgrade
        yield Bumped(cluster, refused)
    finally:
        cluster.stop()


def test_the_previous_release_lacks_what_the_stage_release_adds(previous_crds, box):
    old, new = _schemas(previous_crds), _schemas(box.charts["kuberay-operator"] / "crds")
    assert not _has_upgrade_strategy(old["rayclusters.ray.io"])
    assert _has_upgrade_strategy(new["rayclusters.ray.io"])


def test_helm_leaves_the_previous_crds_on_the_deploys_upgrade(bumped, previous_crds):
    old = _schemas(previous_crds)
    assert _stored(bumped.cluster, old) == old


def test_the_crd_step_brings_the_crds_to_the_stage_release(bumped, box, dev_steps):
    (step,) = [s for s in dev_steps if s.crds]
    assert step.crds == {
        "chart": "kuberay-operator",
        "repository": "https://ray-project.github.io/kuberay-helm/",
        "version": "1.6.2",
    }
    session.apply_crds(bumped.cluster, box, step)
    new = _schemas(box.charts["kuberay-operator"] / "crds")
    stored = _stored(bumped.cluster, new)
    assert stored == new
    assert _has_upgrade_strategy(stored["rayclusters.ray.io"])


def test_the_crd_step_comes_before_the_release_it_upgrades(dev_steps):
    order = [s.label for s in dev_steps if s.crds or (s.helm and s.helm["chart"] == "kuberay-operator")]
    assert order == ["CRDs of kuberay-operator 1.6.2", "Helm release kuberay-operator (kuberay-operator 1.6.2)"]
    (release,) = [s for s in dev_steps if s.helm and s.helm["chart"] == "kuberay-operator"]
    assert release.helm["skip_crds"] is True


def test_a_plain_helm_4_install_fails_on_crds_another_manager_holds(bumped):
    assert "failed to install CRD crds/ray.io_rayclusters.yaml" in bumped.refused_install
    assert 'conflict with "kubectl-create"' in bumped.refused_install


def test_the_crd_step_is_the_one_writer_of_the_deployed_crds(cluster, installed):
    crd = cluster.api().get(CRD_PATH + "rayservices.ray.io")
    writers = {m["manager"] for m in crd["metadata"]["managedFields"] if m.get("subresource") != "status"}
    assert writers == {"pd-inference-kuberay-crds"}
