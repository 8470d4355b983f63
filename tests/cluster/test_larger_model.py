"""The larger-model example stage (docs/larger-model.example.yaml: TP 4 engines on g6.12xlarge nodes) deployed on a
control plane of its own, as the dev stage is: the operator makes one Ray worker per GPU node, each asks for the
node's four GPUs, the scheduler binds them to different nodes, and the serve config the head receives keeps each
engine's ranks on its node. What Ray does inside the pods (the engines' placement groups): tests/charts/
test_tp_placement_on_ray.py."""

from __future__ import annotations

import pytest
import yaml

from localcluster import checks, deploy_order, session

from .conftest import stage_on_a_cluster_of_its_own


@pytest.fixture(scope="module")
def larger_steps(tmp_path_factory, larger):
    return deploy_order.steps(session.synthesize(larger, tmp_path_factory.mktemp("cdk") / "cdk.out"))


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, larger, box, larger_steps):
    folder = tmp_path_factory.mktemp("larger-model")
    with stage_on_a_cluster_of_its_own(folder, larger, box, larger_steps) as (cluster, head, made):
        yield cluster, head, made


def _node(cluster, name: str) -> dict:
    return cluster.api().get(f"/api/v1/nodes/{name}")


def test_each_ray_worker_holds_a_whole_four_gpu_node_of_its_own(deployed, larger):
    cluster, _, made = deployed
    workers = made.pods_of("worker")
    assert len(workers) == larger.gpu_nodegroup.count == 2
    nodes = [w["spec"]["nodeName"] for w in workers]
    assert len(set(nodes)) == 2  # one engine per node
    for worker, node in zip(workers, nodes, strict=True):
        gpus = {c["resources"].get("limits", {}).get("nvidia.com/gpu") for c in worker["spec"]["containers"]}
        assert gpus - {None} == {"4"}
        labels = _node(cluster, node)["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "g6.12xlarge"
        assert labels["topology.kubernetes.io/zone"] == larger.gpu_availability_zone


def test_the_head_receives_tp_4_engines_placed_strict_pack(deployed, larger_steps):
    _, head, made = deployed
    rendered = next(o for o in deploy_order.objects(larger_steps) if o["kind"] == "RayService")
    (body,) = {yaml.safe_dump(b) for b in checks.put_bodies(head, made)}
    assert yaml.safe_load(body) == yaml.safe_load(rendered["spec"]["serveConfigV2"])
    args = yaml.safe_load(body)["applications"][0]["args"]
    engines = [args[side] for side in ("prefill_config", "decode_config")]
    assert [e["engine_kwargs"]["tensor_parallel_size"] for e in engines] == [4, 4]
    assert [e["placement_group_config"]["strategy"] for e in engines] == ["STRICT_PACK", "STRICT_PACK"]


def test_ops_verify_passes_on_the_larger_stage(deployed, larger):
    cluster, _, _ = deployed
    report = checks.verify_checks(larger, cluster)
    assert [(c.name, c.status) for c in report.checks] == [
        ("GPU nodes", "pass"),
        ("KubeRay operator", "pass"),
        ("RayService", "pass"),
    ]
