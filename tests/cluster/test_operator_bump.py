"""The KubeRay CRDs through a first install and an operator bump, on a cluster of its own, with the release
installed by the cluster stack's kubectl handler itself (aws-cdk-lib's, from the synthesized assembly:
tests/cluster/kubectl_handler.py) and the kubectl layer's Helm 4.1.4.

The cluster starts with the previous release's CRDs (KubeRay 1.5.0: ray-operator@v1.5.0's config/crd/bases, the
files that release's chart carries in crds/, as 1.6.2's chart carries its own; the 1.5.0 chart itself is not
served, its root module is refused by the proxy), created as KubeRay's docs install them (`kubectl create`).
The handler reads SkipCrds but never passes `--skip-crds` (its helm_handler calls `helm()` without it), so
Helm 4's install applies crds/ server-side without force (helm.sh/helm/v4 v4.1.4 pkg/action/install.go
installCRDs; pkg/kube/client.go Create: server-side apply by default, field manager "helm", the base name of
its argv[0]): over those CRDs it is refused. The cluster stack's KubeRayCrds step therefore runs first and
brings them to 1.6.2 with --force-conflicts; Helm's install then applies the same files and conflicts with
nothing. For the bump, the CRDs are put back at 1.5.0 as a deploy of 1.5.0 leaves them (the step's apply, then
Helm's): the deploy's upgrade leaves them there (an upgrade never reads crds/), and the step brings them to
1.6.2 although Helm holds the same fields (spec.versions, which carries every schema, is one atomic field)."""

from __future__ import annotations

import copy
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from localcluster import helm, session, tools
from localcluster.apply import Applier
from localcluster.control_plane import LocalCluster
from stacks.kuberay_crds_handler.index import FIELD_MANAGER

from . import kubectl_handler

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
HELM_MANAGER = "helm"


def _schemas(folder: Path) -> dict[str, dict]:
    crds = [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("ray.io_*.yaml"))]
    return {c["metadata"]["name"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for c in crds}


def _stored(cluster, names) -> dict[str, dict]:
    api = cluster.api()
    return {n: api.get(CRD_PATH + n)["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for n in names}


def _writers(cluster, name: str) -> dict[str, dict]:
    """Each field manager of the CRD (status aside) and the fields it holds."""
    crd = cluster.api().get(CRD_PATH + name)
    return {m["manager"]: m["fieldsV1"] for m in crd["metadata"]["managedFields"] if m.get("subresource") != "status"}


def _has_upgrade_strategy(schema: dict) -> bool:
    # RayCluster's spec.upgradeStrategy is new in 1.6 (absent from 1.5.0's CRD).
    return "upgradeStrategy" in schema["properties"]["spec"]["properties"]


@pytest.fixture(scope="module")
def previous_crds(box) -> Path:
    return tools.module_dir(tools.KUBERAY_PREVIOUS_CRDS, box.caches) / "config" / "crd" / "bases"


@dataclass(frozen=True)
class Bumped:
    cluster: LocalCluster
    refused: subprocess.CompletedProcess  # the handler's install before the step, its event with SkipCrds set
    installed: subprocess.CompletedProcess  # the handler's install once the step ran
    after_install: dict[str, dict]  # the stored schemas then
    after_upgrade: dict[str, dict]  # the stored schemas after the deploy's upgrade over the previous CRDs


def _apply_files(cluster, folder: Path, manager: str) -> None:
    admin = Applier(cluster.api())
    for crd in sorted(folder.glob("ray.io_*.yaml")):
        admin.apply(yaml.safe_load(crd.read_text()), manager=manager)


@pytest.fixture(scope="module")
def bumped(tmp_path_factory, dev_cfg, box, dev_assembly, dev_steps, previous_crds):
    """A first install over the previous CRDs (refused without the step, done after it), then a bump."""
    folder = tmp_path_factory.mktemp("bump")
    cluster = session.start(dev_cfg, folder, box)
    try:
        _apply_files(cluster, previous_crds, "kubectl-create")
        namespace = next(s for s in dev_steps if s.objects and s.objects[0]["kind"] == "Namespace")
        for obj in namespace.objects:
            Applier(cluster.api()).apply(obj)
        (crd_step,) = [s for s in dev_steps if s.crds]
        (release,) = [s for s in dev_steps if s.helm and s.helm["chart"] == "kuberay-operator"]
        handler = kubectl_handler.handler_dir(dev_assembly, release.stack)
        chart = box.charts["kuberay-operator"]
        event = kubectl_handler.helm_event(dev_assembly, release, dev_cfg.cluster_name, chart)

        def run(event: dict, name: str) -> subprocess.CompletedProcess:
            return kubectl_handler.run_helm(handler, event, box.layer.helm, cluster.kubeconfig(), folder / name)

        skipping = copy.deepcopy(event)
        skipping["ResourceProperties"]["SkipCrds"] = True
        refused = run(skipping, "refused")
        session.apply_crds(cluster, box, crd_step)
        installed = run(event, "install")
        after_install = _stored(cluster, _schemas(chart / "crds"))
        _apply_files(cluster, previous_crds, FIELD_MANAGER)  # the CRDs as a deploy of 1.5.0 leaves them
        _apply_files(cluster, previous_crds, HELM_MANAGER)
        upgraded = run({**event, "RequestType": "Update"}, "upgrade")
        assert upgraded.returncode == 0, upgraded.stderr[-2000:]
        yield Bumped(cluster, refused, installed, after_install, _stored(cluster, _schemas(previous_crds)))
    finally:
        cluster.stop()


def test_the_previous_release_lacks_what_the_stage_release_adds(previous_crds, box):
    old, new = _schemas(previous_crds), _schemas(box.charts["kuberay-operator"] / "crds")
    assert not _has_upgrade_strategy(old["rayclusters.ray.io"])
    assert _has_upgrade_strategy(new["rayclusters.ray.io"])


def test_the_kubectl_handler_never_passes_skip_crds(bumped):
    argv = kubectl_handler.helm_argv(bumped.refused.stderr)
    assert argv[:2] == ["helm", "upgrade"] and "--skip-crds" not in argv


def test_without_the_step_helms_install_fails_on_crds_another_manager_holds(bumped):
    assert bumped.refused.returncode != 0
    assert "failed to install CRD crds/ray.io_rayclusters.yaml" in bumped.refused.stderr
    assert 'conflict with "kubectl-create"' in bumped.refused.stderr


def test_after_the_step_helms_install_applies_the_same_crds_and_succeeds(bumped, box):
    assert bumped.installed.returncode == 0, bumped.installed.stderr[-2000:]
    assert bumped.after_install == _schemas(box.charts["kuberay-operator"] / "crds")


def test_helm_leaves_the_previous_crds_on_the_deploys_upgrade(bumped, previous_crds):
    assert bumped.after_upgrade == _schemas(previous_crds)


def test_the_crd_step_brings_the_crds_to_the_stage_release_though_helm_holds_them(bumped, box, dev_steps):
    (step,) = [s for s in dev_steps if s.crds]
    assert step.crds == {
        "chart": "kuberay-operator",
        "repository": "https://ray-project.github.io/kuberay-helm/",
        "version": "1.6.2",
    }
    assert HELM_MANAGER in _writers(bumped.cluster, "rayclusters.ray.io")
    session.apply_crds(bumped.cluster, box, step)
    new = _schemas(box.charts["kuberay-operator"] / "crds")
    stored = _stored(bumped.cluster, new)
    assert stored == new
    assert _has_upgrade_strategy(stored["rayclusters.ray.io"])


def test_the_crd_step_comes_before_the_release_it_upgrades(dev_steps):
    order = [s.label for s in dev_steps if s.crds or (s.helm and s.helm["chart"] == "kuberay-operator")]
    assert order == ["CRDs of kuberay-operator 1.6.2", "Helm release kuberay-operator (kuberay-operator 1.6.2)"]


@pytest.mark.parametrize("name", ["rayclusters.ray.io", "rayjobs.ray.io", "raycronjobs.ray.io", "rayservices.ray.io"])
def test_helm_holds_exactly_the_fields_the_step_holds_on_the_deployed_crds(cluster, installed, name):
    writers = _writers(cluster, name)
    assert set(writers) == {FIELD_MANAGER, HELM_MANAGER}
    assert writers[HELM_MANAGER] == writers[FIELD_MANAGER]


def test_the_local_clusters_helm_runs_the_handlers_argv(bumped, dev_steps):
    """localcluster/helm.py, which installs every release of the other cluster tests, builds the handler's argv."""
    ran = kubectl_handler.helm_argv(bumped.installed.stderr)
    (step,) = [s for s in dev_steps if s.helm and s.helm["chart"] == "kuberay-operator"]
    values, chart, kubeconfig = Path(ran[ran.index("--values") + 1]), Path(ran[3]), Path(ran[-1])
    assert helm.upgrade_argv(Path("helm"), helm.Release.of(step.helm), chart, values, kubeconfig) == ran
