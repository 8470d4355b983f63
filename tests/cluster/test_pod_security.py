"""Pod Security admission is real: the Ray pods made from our templates are admitted in the serving
namespace at its enforce level, and a pod that breaks a namespace's level is refused."""

from __future__ import annotations

import pytest

from localcluster import checks
from localcluster.apply import ApplyError


@pytest.fixture(scope="module")
def pods(installed):
    return checks.ray_pods(checks.ray_service(installed.objects))


def test_the_head_and_worker_pods_are_admitted_in_the_serving_namespace(pods, admin):
    assert [p["metadata"]["labels"]["ray.io/node-type"] for p in pods] == ["head", "worker"]
    for pod in pods:
        assert checks.admitted(admin, pod) is None


@pytest.fixture(scope="module")
def baseline_namespace(cluster, installed):
    from localcluster.apply import Applier

    applier = Applier(cluster.api())
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "baseline-probe", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}},
    }
    applier.apply(namespace)
    serving_account = next(o for o in installed.objects if o["kind"] == "ServiceAccount")
    applier.apply(
        {**serving_account, "metadata": {"name": serving_account["metadata"]["name"], "namespace": "baseline-probe"}}
    )
    return "baseline-probe"


def test_the_privileged_worker_is_refused_in_a_baseline_namespace(installed, admin, baseline_namespace):
    (worker,) = [
        p
        for p in checks.ray_pods(checks.ray_service(installed.objects), baseline_namespace)
        if p["metadata"]["labels"]["ray.io/node-type"] == "worker"
    ]
    with pytest.raises(
        ApplyError,
        match=r'HTTP 403 .*violates PodSecurity "baseline:latest": .*privileged \(container '
        r'"ray-worker" must not set securityContext.privileged=true\)',
    ):
        admin.create(worker, dry_run=True)


def test_the_head_pod_meets_baseline(installed, admin, baseline_namespace):
    (head,) = [
        p
        for p in checks.ray_pods(checks.ray_service(installed.objects), baseline_namespace)
        if p["metadata"]["labels"]["ray.io/node-type"] == "head"
    ]
    assert checks.admitted(admin, head) is None


def test_the_operator_namespace_enforces_restricted(cluster, installed):
    labels = cluster.api().get("/api/v1/namespaces/kuberay-system")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
