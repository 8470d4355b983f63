"""Teardown deletes what the deploy applied in destroy order, on a cluster of its own, and the namespace
controller removes the namespaces."""

from __future__ import annotations

from localcluster import deploy_order, rehearsal
from ops.kube import KubeError


def test_teardown_deletes_in_reverse_deploy_order_and_the_namespaces_go(tmp_path, dev_cfg, binaries, dev_steps):
    cluster = rehearsal.start(dev_cfg, tmp_path / "cluster", binaries)
    try:
        rehearsal.install(cluster, dev_steps)
        deleted = rehearsal.teardown(cluster, dev_steps)
        applied = [
            f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
            for o in deploy_order.objects(dev_steps)
        ]
        assert deleted == list(reversed(applied))
        assert deleted.index("RayService/inference/ray-llm") < deleted.index("Namespace//inference")
        for namespace in ("inference", "kuberay-system"):
            try:
                cluster.api().get(f"/api/v1/namespaces/{namespace}")
                raise AssertionError(f"namespace {namespace} still exists")
            except KubeError as exc:
                assert exc.status == 404
    finally:
        cluster.stop()
