"""NetworkPolicies: exactly which peers reach which ports of the Ray pods."""
from __future__ import annotations

import pytest

from charts.network_policies import network_policies

CONTROL_PLANE = ["10.0.128.0/28", "10.0.128.16/28"]
RAY = {"matchLabels": {"app.kubernetes.io/part-of": "ray-llm"}}
HEAD = {"matchLabels": {"app.kubernetes.io/part-of": "ray-llm", "ray.io/node-type": "head"}}


@pytest.fixture
def dev_policies(dev):
    return network_policies(dev.serving, api_proxy_cidrs=CONTROL_PLANE)


def _rules(policy):
    return [(peer, sorted(p["port"] for p in rule.get("ports", [])) or "all")
            for rule in policy.get("ingress", []) for peer in rule["from"]]


def test_everything_else_is_denied(dev_policies):
    assert dev_policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}


def test_ray_pods_reach_each_other_on_every_port(dev_policies):
    # GCS 6379, raylet and object store, dashboard 8265, Serve 8000, NIXL side channels 20000+ / 22000+
    policy = dev_policies["ray-pods"]
    assert policy["podSelector"] == RAY
    assert _rules(policy) == [({"podSelector": RAY}, "all")]


def test_only_the_kuberay_operator_reaches_the_heads_dashboard_and_agent(dev_policies):
    policy = dev_policies["kuberay-operator"]
    assert policy["podSelector"] == HEAD
    assert _rules(policy) == [({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}},
                                "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}}},
                               [8265, 52365])]


def test_the_api_server_proxy_reaches_serve_and_the_dashboard_from_the_control_plane_subnets_only(dev_policies):
    serve, dashboard = dev_policies["api-server-proxy-serve"], dev_policies["api-server-proxy-dashboard"]
    peers = [{"ipBlock": {"cidr": cidr}} for cidr in CONTROL_PLANE]
    assert serve["podSelector"] == RAY and _rules(serve) == [(p, [8000]) for p in peers]
    assert dashboard["podSelector"] == HEAD and _rules(dashboard) == [(p, [8265]) for p in peers]


def test_no_client_namespaces_no_client_rule(dev_policies):
    assert set(dev_policies) == {"default-deny-ingress", "ray-pods", "kuberay-operator", "api-server-proxy-serve",
                                 "api-server-proxy-dashboard"}


def test_configured_client_namespaces_reach_serve_only(stages):
    policy = network_policies(stages["prod"].serving, api_proxy_cidrs=CONTROL_PLANE)["serve-clients"]
    assert policy["podSelector"] == RAY
    assert _rules(policy) == [({"namespaceSelector": {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["gateway"]}]}}, [8000])]


def test_the_dashboard_is_never_open_beyond_those_peers(dev, stages):
    for cfg in (dev, stages["prod"]):
        for name, policy in network_policies(cfg.serving, api_proxy_cidrs=CONTROL_PLANE).items():
            for peer, ports in _rules(policy):
                if ports == "all" or 8265 in ports:
                    allowed = peer in ({"podSelector": RAY}, *[{"ipBlock": {"cidr": c}} for c in CONTROL_PLANE])
                    operator = "namespaceSelector" in peer and "podSelector" in peer
                    assert allowed or operator, (name, peer)


def test_policies_select_the_labels_the_ray_pods_carry(app_synth):
    import json
    (manifest,) = app_synth.resources("dev", "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
    objects = json.loads(manifest["Properties"]["Manifest"])
    (ray_service,) = [o for o in objects if o["kind"] == "RayService"]
    cluster = ray_service["spec"]["rayClusterConfig"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert group["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ray-llm"
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert {p["metadata"]["namespace"] for p in policies} == {"inference"} and len(policies) == 5
