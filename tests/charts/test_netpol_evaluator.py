"""The NetworkPolicy evaluator on known cases: each test pins one rule of the API's semantics, so the flow
matrix (test_network_flows.py) can be trusted when it admits or refuses a flow."""

from __future__ import annotations

import pytest

from .netpol import Cluster, External, Node, Pod, selector_matches


def _policy(name, namespace="app", **spec):
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


WEB = Pod("web", "app", {"app": "web", "tier": "front"}, "10.1.0.5", {"http": 8080})
DB = Pod("db", "app", {"app": "db"}, "10.1.0.6")
OTHER = Pod("other", "tools", {"app": "web"}, "10.2.0.7")
NAMESPACES = {"app": {}, "tools": {"team": "ops"}}


def _cluster(*policies):
    return Cluster(NAMESPACES, policies)


def test_a_pod_no_policy_selects_admits_everything():
    cluster = _cluster(_policy("db-only", podSelector={"matchLabels": {"app": "db"}}, policyTypes=["Ingress"]))
    assert cluster.allows(OTHER, WEB, 1234)
    assert not cluster.allows(OTHER, DB, 1234)


def test_a_policy_without_rules_isolates_and_denies():
    cluster = _cluster(_policy("deny", podSelector={}, policyTypes=["Ingress"]))
    assert not cluster.allows(DB, WEB, 8080)
    assert not cluster.allows(External("node", "10.0.0.1"), WEB, 8080)


def test_a_pods_own_node_always_reaches_it_other_nodes_do_not():
    cluster = _cluster(_policy("deny", podSelector={}, policyTypes=["Ingress"]))
    assert cluster.allows(Node("node-a", "10.0.0.1"), WEB, 52365)  # WEB runs on node-a: kubelet probes
    assert not cluster.allows(Node("node-b", "10.0.0.2"), WEB, 52365)


def test_policy_types_default_to_ingress_only():
    # No policyTypes and no egress rules: the pod is isolated for ingress, not for egress.
    cluster = _cluster(_policy("deny", podSelector={}))
    assert not cluster.allows(OTHER, WEB, 80)
    assert cluster.allows(WEB, OTHER, 80)


def test_policies_are_additive():
    cluster = _cluster(
        _policy("deny", podSelector={}, policyTypes=["Ingress"]),
        _policy(
            "db-to-web",
            podSelector={"matchLabels": {"app": "web"}},
            policyTypes=["Ingress"],
            ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "db"}}}]}],
        ),
    )
    assert cluster.allows(DB, WEB, 1)
    assert not cluster.allows(OTHER, WEB, 1)


def test_a_pod_selector_alone_means_the_policys_namespace():
    cluster = _cluster(
        _policy(
            "web-from-web",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}]}],
        )
    )
    same_labels_other_namespace = OTHER
    assert not cluster.allows(same_labels_other_namespace, DB, 1)


def test_a_namespace_selector_alone_means_every_pod_there():
    cluster = _cluster(
        _policy(
            "from-ops",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"team": "ops"}}}]}],
        )
    )
    assert cluster.allows(OTHER, WEB, 1)
    assert not cluster.allows(DB, WEB, 1)


def test_both_selectors_in_one_peer_are_anded_in_two_peers_ored():
    anded = _cluster(
        _policy(
            "and",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"team": "ops"}},
                            "podSelector": {"matchLabels": {"app": "db"}},
                        }
                    ]
                }
            ],
        )
    )
    ored = _cluster(
        _policy(
            "or",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {"team": "ops"}}},
                        {"podSelector": {"matchLabels": {"app": "db"}}},
                    ]
                }
            ],
        )
    )
    assert not anded.allows(OTHER, WEB, 1)  # ops namespace, but not app=db
    assert ored.allows(OTHER, WEB, 1) and ored.allows(DB, WEB, 1)


def test_the_namespace_name_label_is_set_on_every_namespace():
    cluster = _cluster(
        _policy(
            "by-name",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["tools"]}
                                ]
                            }
                        }
                    ]
                }
            ],
        )
    )
    assert cluster.allows(OTHER, WEB, 1) and not cluster.allows(DB, WEB, 1)


def test_ip_block_with_except():
    cluster = _cluster(
        _policy(
            "cidr",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[{"from": [{"ipBlock": {"cidr": "10.0.0.0/24", "except": ["10.0.0.128/25"]}}]}],
        )
    )
    assert cluster.allows(External("in", "10.0.0.10"), WEB, 1)
    assert not cluster.allows(External("excepted", "10.0.0.200"), WEB, 1)
    assert not cluster.allows(External("outside", "10.0.1.10"), WEB, 1)


def test_selectors_never_match_an_endpoint_outside_the_pod_network():
    cluster = _cluster(
        _policy(
            "all-namespaces", podSelector={}, policyTypes=["Ingress"], ingress=[{"from": [{"namespaceSelector": {}}]}]
        )
    )
    assert cluster.allows(OTHER, WEB, 1)
    assert not cluster.allows(External("node", "10.0.0.1"), WEB, 1)


def test_empty_from_and_empty_ports_admit_everything():
    cluster = _cluster(_policy("open", podSelector={}, policyTypes=["Ingress"], ingress=[{}]))
    assert cluster.allows(External("anyone", "203.0.113.9"), WEB, 65535)


@pytest.mark.parametrize("port, admitted", [(19999, False), (20000, True), (20063, True), (20064, False)])
def test_end_port_makes_an_inclusive_range(port, admitted):
    cluster = _cluster(
        _policy(
            "range",
            podSelector={},
            policyTypes=["Ingress"],
            ingress=[{"ports": [{"protocol": "TCP", "port": 20000, "endPort": 20063}]}],
        )
    )
    assert cluster.allows(DB, WEB, port) is admitted


def test_named_ports_resolve_on_the_destination_pod():
    cluster = _cluster(
        _policy("named", podSelector={}, policyTypes=["Ingress"], ingress=[{"ports": [{"port": "http"}]}])
    )
    assert cluster.allows(DB, WEB, 8080)
    assert not cluster.allows(DB, WEB, 8081)
    assert not cluster.allows(WEB, DB, 8080)  # db has no port named http


def test_protocol_defaults_to_tcp():
    cluster = _cluster(_policy("tcp", podSelector={}, policyTypes=["Ingress"], ingress=[{"ports": [{"port": 53}]}]))
    assert cluster.allows(DB, WEB, 53, "TCP")
    assert not cluster.allows(DB, WEB, 53, "UDP")


def test_egress_of_the_source_must_admit_too():
    cluster = _cluster(_policy("no-egress", podSelector={"matchLabels": {"app": "db"}}, policyTypes=["Egress"]))
    assert not cluster.allows(DB, WEB, 1)
    assert cluster.allows(WEB, DB, 1)


@pytest.mark.parametrize(
    "selector, labels, matches",
    [
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {"a": "x"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "y"}, False),
        ({"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "1"}, False),
        ({}, {"anything": "1"}, True),
    ],
)
def test_label_selector_operators(selector, labels, matches):
    assert selector_matches(selector, labels) is matches


def test_the_operator_policy_before_the_fix_refuses_the_serve_health_check():
    # The policy as it was up to this change: the operator reached the head's dashboard (8265) and agent
    # (52365) only. KubeRay's RayService controller calls http://<head pod IP>:8000/-/healthz, so the
    # evaluator must refuse that flow here (the flow matrix then fails on the old chart).
    head = Pod("head", "inference", {"app.kubernetes.io/part-of": "ray-llm", "ray.io/node-type": "head"}, "10.1.0.9")
    operator = Pod("operator", "kuberay-system", {"app.kubernetes.io/name": "kuberay-operator"}, "10.1.1.9")
    old = Cluster(
        {"inference": {}, "kuberay-system": {}},
        [
            {
                "metadata": {"name": "default-deny-ingress", "namespace": "inference"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
            },
            {
                "metadata": {"name": "kuberay-operator", "namespace": "inference"},
                "spec": {
                    "podSelector": {"matchLabels": {"ray.io/node-type": "head"}},
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {
                            "from": [
                                {
                                    "namespaceSelector": {
                                        "matchLabels": {"kubernetes.io/metadata.name": "kuberay-system"}
                                    },
                                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}},
                                }
                            ],
                            "ports": [{"protocol": "TCP", "port": 8265}, {"protocol": "TCP", "port": 52365}],
                        }
                    ],
                },
            },
        ],
    )
    assert old.allows(operator, head, 8265)
    assert not old.allows(operator, head, 8000)
