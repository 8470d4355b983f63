"""The TP placement (charts/serve_config.py TP_PLACEMENT) on Ray's own scheduler: a local Ray cluster of two
fake 4-GPU nodes with two GPUs of each taken, as on a busy cluster. Ray Serve LLM's default, PACK, splits a TP 4
engine's bundles over both nodes; the rendered STRICT_PACK leaves them waiting for one node."""

from __future__ import annotations

import socket

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

from charts.serve_config import build_serve_config


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def busy_cluster():
    # Off the ports of a `ray start` on this machine (Ray's defaults: dashboard 8265, its agent 52365,
    # ray/_private/parameter.py): the pipeline's check runs this file while the suite's real Ray test may run.
    head = {"dashboard_port": _free_port(), "dashboard_agent_listen_port": _free_port()}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, **head})
    for _ in range(2):
        cluster.add_node(num_cpus=4, num_gpus=4)
    ray.init(address=cluster.address, include_dashboard=False, logging_level="ERROR")
    try:
        cluster.wait_for_nodes()
        held = [placement_group([{"GPU": 2}], strategy="STRICT_PACK") for _ in range(2)]
        ray.get([pg.ready() for pg in held], timeout=60)
        nodes = {placement_group_table(pg)["bundles_to_node_id"][0] for pg in held}
        assert len(nodes) == 2  # two GPUs taken on each node
        yield
    finally:
        ray.shutdown()
        cluster.shutdown()


def _engine_bundles(llm: dict, tp: int) -> list[dict]:
    # Ray Serve LLM's expansion: bundle_per_worker once per TP rank (vllm_models.py placement_bundles), the replica
    # actor's CPU merged into the first (llm_server.py _merge_replica_actor_and_child_actor_bundles)
    bundles = [dict(llm["placement_group_config"]["bundle_per_worker"]) for _ in range(tp)]
    bundles[0]["CPU"] = bundles[0].get("CPU", 0) + 1
    return bundles


def _nodes_used(bundles: list[dict], strategy: str, within: float) -> int | None:
    pg = placement_group(bundles, strategy=strategy)
    try:
        return len(set(placement_group_table(pg)["bundles_to_node_id"].values())) if pg.wait(within) else None
    finally:
        remove_placement_group(pg)


def test_rays_default_splits_a_tp_engine_over_two_nodes_and_the_rendered_strategy_waits(busy_cluster, larger):
    llm = build_serve_config(larger.serving)["applications"][0]["args"]["prefill_config"]
    bundles = _engine_bundles(llm, llm["engine_kwargs"]["tensor_parallel_size"])
    assert _nodes_used(bundles, "PACK", within=60) == 2
    # no single node has four GPUs free: it never places, whatever the wait (5 s only bounds the test)
    assert _nodes_used(bundles, llm["placement_group_config"]["strategy"], within=5) is None
