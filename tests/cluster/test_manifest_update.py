"""A later deploy of the serving stack, as the kubectl handler runs a manifest's Update (aws-cdk-lib
custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/apply/__init__.py: the objects as concatenated
JSON, `kubectl apply -f FILE --prune -l PRUNE_LABEL`), with the kubectl layer's kubectl, after the operator
made its objects. KubeRay copies the RayService's labels, CDK's prune label among them, onto the RayCluster;
kubectl's default prune allowlist holds no custom resources, so nothing the operator made is pruned."""

from __future__ import annotations

import json
import subprocess

import pytest

from localcluster import ray_objects


@pytest.fixture(scope="module")
def serving_step(dev_steps):
    return next(s for s in dev_steps if s.objects and any(o["kind"] == "RayService" for o in s.objects))


@pytest.fixture(scope="module")
def updated(cluster, made, box, serving_step, tmp_path_factory):
    manifest = tmp_path_factory.mktemp("update") / "manifest.yaml"
    manifest.write_text("".join(json.dumps(o) for o in serving_step.objects))  # as the handler writes it
    argv = [str(box.layer.kubectl), "apply", "--kubeconfig", str(cluster.kubeconfig()), "-f", str(manifest)]
    argv += ["--prune", "-l", serving_step.prune_label]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_the_raycluster_carries_the_manifests_prune_label(made, serving_step):
    assert serving_step.prune_label in made.cluster["metadata"]["labels"]


def test_the_handlers_update_succeeds(updated):
    assert updated.returncode == 0, updated.stderr
    assert "pruned" not in updated.stdout


def test_nothing_the_operator_made_is_pruned(cluster, made, updated, dev_cfg):
    after = ray_objects.read(cluster.api(), dev_cfg.serving.namespace, dev_cfg.serving.service_name)
    assert after.cluster_name == made.cluster_name
    assert sorted(after.services) == sorted(made.services)
    assert {p["metadata"]["name"] for p in after.pods} == {p["metadata"]["name"] for p in made.pods}
