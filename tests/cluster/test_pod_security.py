"""Pod Security admission is real and judges the pods the KubeRay operator made (its init container and
probes included), and the chart's operator pod in the restricted operator namespace."""

from __future__ import annotations

import copy

import pytest

from config.topology import KUBERAY_NAMESPACE, KUBERAY_RELEASE
from localcluster import checks, ray_objects
from localcluster.apply import Applier, ApplyError

BASELINE = "baseline-probe"


def _as_new(pod: dict, namespace: str) -> dict:
    """The operator's pod, as a new pod of another namespace (what a controller would POST)."""
    spec = copy.deepcopy(pod["spec"])
    spec.pop("nodeName", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod["metadata"]["name"], "namespace": namespace, "labels": pod["metadata"]["labels"]},
        "spec": spec,
    }


@pytest.fixture(scope="module")
def baseline_namespace(cluster, installed):
    admin = Applier(cluster.api())
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": BASELINE, "labels": {"pod-security.kubernetes.io/enforce": "baseline"}},
        }
    )
    account = next(o for o in installed.objects if o["kind"] == "ServiceAccount")
    admin.apply({**account, "metadata": {"name": account["metadata"]["name"], "namespace": BASELINE}})
    return BASELINE


def test_every_pod_the_operator_asked_for_was_admitted(made, dev_cfg):
    groups = made.service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert len(made.pods) == 1 + sum(g["replicas"] for g in groups)
    assert {p["metadata"]["namespace"] for p in made.pods} == {dev_cfg.serving.namespace}


def test_the_workers_init_container_copies_the_workers_security_context(made):
    for worker in made.pods_of("worker"):
        (init,) = worker["spec"]["initContainers"]
        assert init["name"] == "wait-gcs-ready"
        assert init["securityContext"] == worker["spec"]["containers"][0]["securityContext"]


def test_the_operators_worker_pod_is_refused_in_a_baseline_namespace(made, admin, baseline_namespace):
    worker = _as_new(made.pods_of("worker")[0], baseline_namespace)
    with pytest.raises(ApplyError, match=r'violates PodSecurity "baseline:latest": .*privileged') as refused:
        admin.create(worker, dry_run=True)
    assert '"wait-gcs-ready"' in str(refused.value) and '"ray-worker"' in str(refused.value)


def test_the_operators_head_pod_meets_baseline(made, admin, baseline_namespace):
    admin.create(_as_new(made.pods_of("head")[0], baseline_namespace), dry_run=True)


def test_the_charts_operator_pod_runs_in_the_restricted_operator_namespace(cluster, made):
    api = cluster.api()
    labels = api.get(f"/api/v1/namespaces/{KUBERAY_NAMESPACE}")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = api.get(
        f"/api/v1/namespaces/{KUBERAY_NAMESPACE}/pods", labelSelector=f"app.kubernetes.io/instance={KUBERAY_RELEASE}"
    )["items"]
    assert [p["status"]["phase"] for p in pods] == ["Running"]


def test_a_refused_pod_of_the_operator_shows_in_the_pod_security_check(
    cluster, made, admin, baseline_namespace, installed
):
    # The stage's RayService in the baseline namespace: the operator's privileged workers are refused there.
    service = copy.deepcopy(next(o for o in installed.objects if o["kind"] == "RayService"))
    probe = {
        "apiVersion": service["apiVersion"],
        "kind": "RayService",
        "metadata": {"name": "ray-llm-baseline", "namespace": baseline_namespace},
        "spec": service["spec"],
    }
    admin.apply(probe)
    try:
        refused = ray_objects.wait_until(
            lambda: checks.pod_security_refusals(cluster, baseline_namespace), "a Pod Security refusal", 60
        )
        assert 'violates PodSecurity "baseline:latest"' in refused[0]
    finally:
        admin.delete(probe, wait=60)
