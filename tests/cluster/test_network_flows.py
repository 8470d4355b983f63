"""The flow matrix (tests/charts/test_network_flows.py FLOWS) on the pods the real KubeRay operator made:
their labels, IPs, container ports and nodes as the API server stores them, the operator pod the chart's
Deployment made, and the NetworkPolicies as the API server stored them. The chart-level matrix models the
operator's pods (tests/charts/kuberay_pods.py) for the stages no local cluster runs; the last tests hold that
model to these pods."""

from __future__ import annotations

from typing import Any

import pytest

from config.topology import DASHBOARD_AGENT_PORT, KUBERAY_NAMESPACE, KUBERAY_RELEASE
from tests.charts.kuberay_pods import CLUSTER, HEAD_GROUP, kuberay_pod, operator_pod
from tests.charts.netpol import Cluster, Node, Pod
from tests.charts.test_network_flows import FLOWS, namespaces, others, subnet_cidrs


def _ports(pod: dict[str, Any]) -> dict[str, int]:
    return {
        p["name"]: p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports") or [] if "name" in p
    }


def _pod(pod: dict[str, Any]) -> Pod:
    meta = pod["metadata"]
    return Pod(
        meta["name"], meta["namespace"], meta["labels"], pod["status"]["podIP"], _ports(pod), pod["spec"]["nodeName"]
    )


@pytest.fixture(scope="module")
def operator_pods(cluster, made):
    return cluster.api().get(
        f"/api/v1/namespaces/{KUBERAY_NAMESPACE}/pods", labelSelector=f"app.kubernetes.io/instance={KUBERAY_RELEASE}"
    )["items"]


@pytest.fixture(scope="module")
def topology(cluster, made, operator_pods, app_synth, dev_cfg):
    api = cluster.api()
    namespace = dev_cfg.serving.namespace
    head = made.pods_of("head")[0]
    workers = sorted(made.pods_of("worker"), key=lambda p: p["metadata"]["labels"]["ray.io/worker-group-replica-index"])
    pods: dict[str, object] = {"head": _pod(head), **{f"worker-{i}": _pod(w) for i, w in enumerate(workers)}}
    pods["operator"] = _pod(operator_pods[0])
    pods["head-node"] = Node(head["spec"]["nodeName"], "10.0.0.1")
    pods["gpu-node-0"] = Node(workers[0]["spec"]["nodeName"], "10.0.0.1")
    control_plane, private = subnet_cidrs(app_synth, "dev", "control-plane"), subnet_cidrs(app_synth, "dev", "private")
    pods.update(others(namespace, head["metadata"]["labels"], control_plane[-1], private[0], ()))
    policies = api.get(f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies")["items"]
    labels = {
        n: api.get(f"/api/v1/namespaces/{n}")["metadata"]["labels"] if n in (namespace, KUBERAY_NAMESPACE) else {}
        for n in namespaces(namespace, ())
    }
    return Cluster(labels, policies), pods


@pytest.mark.parametrize("flow", [f for f in FLOWS if "dev" in f.stages], ids=lambda flow: flow.id)
def test_flow_on_the_operators_pods(topology, flow):
    cluster, pods = topology
    source, destination = pods[flow.source], pods[flow.destination]
    admitted = cluster.allows(source, destination, flow.port)
    assert admitted is flow.needed, (
        f"{flow.source} -> {flow.destination}:{flow.port} is {'admitted' if admitted else 'refused'} "
        f"({cluster.why(source, destination, flow.port)}); {'needed' if flow.needed else 'not needed'}: {flow.why}"
    )


def test_the_kubelet_probes_the_agent_port_on_every_ray_pod(made):
    # The 52365 flows of the matrix exist: KubeRay's liveness probe (and the head's readiness) is an httpGet.
    for pod in made.pods:
        ray = pod["spec"]["containers"][0]
        assert ray["livenessProbe"]["httpGet"]["port"] == DASHBOARD_AGENT_PORT, pod["metadata"]["name"]


def test_the_matrix_reads_every_stored_policy(topology, installed):
    cluster, _ = topology
    applied = {o["metadata"]["name"] for o in installed.objects if o["kind"] == "NetworkPolicy"}
    assert {p["metadata"]["name"] for p in cluster.policies} == applied


# What each pod instance gets that the model leaves out: from the operator, the generated cluster name in two
# labels, the replica index (RayMultiHostIndexing, on in the chart's feature gates) and the serve label's live
# value; from the API server at binding, the node's zone and region (the PodTopologyLabels admission of 1.35).
PER_INSTANCE = {
    "ray.io/cluster",
    "ray.io/identifier",
    "ray.io/worker-group-replica-index",
    "ray.io/serve",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}


def _modelled(made, pod: dict[str, Any]) -> Pod:
    node_type = pod["metadata"]["labels"]["ray.io/node-type"]
    spec = made.service["spec"]["rayClusterConfig"]
    if node_type == "head":
        template, group = spec["headGroupSpec"]["template"], HEAD_GROUP
    else:
        (workers,) = spec["workerGroupSpecs"]
        template, group = workers["template"], workers["groupName"]
    return kuberay_pod(template, name="m", namespace="m", node_type=node_type, group=group, ip="0.0.0.0", node="n")


def test_the_chart_level_model_gives_the_operators_labels_and_ports(made):
    for pod in made.pods:
        model = _modelled(made, pod)
        real = {k: v for k, v in pod["metadata"]["labels"].items() if k not in PER_INSTANCE}
        assert {k: v for k, v in model.labels.items() if k not in PER_INSTANCE} == real, pod["metadata"]["name"]
        assert model.container_ports == _ports(pod), pod["metadata"]["name"]
        assert model.labels["ray.io/cluster"] == CLUSTER  # the model's stand-in name, never selected on


def test_the_chart_level_operator_model_gives_the_charts_pod_labels(operator_pods):
    model = operator_pod(KUBERAY_RELEASE, KUBERAY_NAMESPACE, "0.0.0.0")
    real = operator_pods[0]["metadata"]["labels"]
    assert {k: real.get(k) for k in model.labels} == dict(model.labels)
    assert model.container_ports == _ports(operator_pods[0])
