"""Teardown in destroy order while the operator still runs, on a cluster of its own: the RayService goes
through the operator's finalizer (its RayCluster and pods with it), Helm uninstalls the operator's release,
and the namespace controller removes the namespaces."""

from __future__ import annotations

import pytest

from clients.kube import KubeError
from localcluster import session

from .conftest import stage_on_a_cluster_of_its_own


@pytest.fixture(scope="module")
def torn_down(tmp_path_factory, dev_cfg, box, dev_steps):
    folder = tmp_path_factory.mktemp("teardown")
    with stage_on_a_cluster_of_its_own(folder, dev_cfg, box, dev_steps) as (cluster, _, made):
        yield cluster, made, session.teardown(cluster, dev_steps, box)


def _gone(cluster, path: str) -> bool:
    try:
        cluster.api().get(path)
    except KubeError as exc:
        return exc.status == 404
    return False


def test_teardown_deletes_in_reverse_deploy_order(torn_down, dev_steps):
    _, _, deleted = torn_down
    applied = []
    for step in dev_steps:
        if step.helm and step.helm["chart"] in session.INSTALLED_CHARTS:
            applied.append(f"HelmRelease/{step.helm['namespace']}/{step.helm['release']}")
        applied += [f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in step.objects]
    assert deleted == list(reversed(applied))
    assert deleted.index("RayService/inference/ray-llm") < deleted.index("HelmRelease/kuberay-system/kuberay-operator")


def test_the_rayservice_went_through_the_operators_finalizer(torn_down, dev_cfg):
    cluster, made, _ = torn_down
    assert "ray.io/rayservice-finalizer" in made.service["metadata"]["finalizers"]
    namespace = dev_cfg.serving.namespace
    assert _gone(cluster, f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{made.cluster_name}")
    assert _gone(cluster, f"/api/v1/namespaces/{namespace}")


def test_the_operators_release_is_uninstalled_and_its_namespace_gone(torn_down):
    cluster, _, _ = torn_down
    assert cluster.process("kuberay-operator") is None
    assert _gone(cluster, "/apis/apps/v1/namespaces/kuberay-system/deployments/kuberay-operator")
    assert _gone(cluster, "/api/v1/namespaces/kuberay-system")


def test_the_crds_stay_as_helm_and_the_crd_step_leave_them(torn_down):
    cluster, _, _ = torn_down
    assert not _gone(cluster, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/rayservices.ray.io")
