"""A small evaluator of Kubernetes NetworkPolicy semantics (networking.k8s.io/v1), for the flow matrix.

It answers one question: is a TCP/UDP/SCTP connection from a source to a destination pod on a port
admitted by a set of NetworkPolicies? The rules are the API's (k8s.io/api/networking/v1/types.go and
https://kubernetes.io/docs/concepts/services-networking/network-policies/):

- A pod is isolated for ingress when at least one policy in its namespace selects it (`podSelector`) and
  lists `Ingress` in `policyTypes` (which defaults to Ingress, plus Egress when `egress` rules exist).
  A pod that is not isolated admits everything. Likewise for egress on the source pod.
- Policies are additive: a flow is admitted when any rule of any selecting policy admits it.
- A rule with no `from` (or an empty list) admits every source; with no `ports`, every port.
- A peer is `ipBlock` (cidr minus `except`), or `podSelector` and/or `namespaceSelector`: a pod
  selector alone means pods of the policy's own namespace; a namespace selector alone means every pod
  of the selected namespaces; both means the selected pods of the selected namespaces.
- Selectors: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist); `{}` selects all.
- Ports: number or the name of a container port of the destination pod; `endPort` makes a range;
  protocol defaults to TCP.
- A connection is admitted only when the source's egress and the destination's ingress both admit it.

- Traffic from a pod's own node (kubelet probes) is always admitted: "Pods cannot ... block access
  from their resident node" (the API docs, "What you can't do"); the AWS network policy agent
  implements it by allowing the node IP (aws/aws-network-policy-agent#65).

Sources outside the pod network (the API server's ENIs) are `External` endpoints: only `ipBlock` peers
can match them. Pods carry an IP so ipBlock peers can match them too.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NAMESPACE_NAME = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: Mapping[str, str]
    ip: str
    container_ports: Mapping[str, int] = field(default_factory=dict)  # port name -> number
    node: str = "node-a"


@dataclass(frozen=True)
class External:
    """An endpoint outside the pod network (its traffic matches ipBlock peers only)."""

    name: str
    ip: str


@dataclass(frozen=True)
class Node:
    """A node's own processes (the kubelet): they always reach the pods running on that node."""

    name: str
    ip: str


Endpoint = Pod | External | Node


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector; an empty (or missing) selector matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            raise ValueError(f"unknown selector operator {operator!r}")
        if not ok:
            return False
    return True


class Cluster:
    """Namespaces (with their labels) and the policies in force, by namespace."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, str]], policies: Iterable[Mapping[str, Any]]) -> None:
        # The API server sets kubernetes.io/metadata.name on every namespace.
        self.namespace_labels = {name: {**labels, NAMESPACE_NAME: name} for name, labels in namespaces.items()}
        self.policies = list(policies)
        for policy in self.policies:
            if policy["metadata"]["namespace"] not in self.namespace_labels:
                raise ValueError(f"policy {policy['metadata']['name']} is in an unknown namespace")

    # -- the question ----------------------------------------------------------------------------
    def allows(self, source: Endpoint, destination: Pod, port: int, protocol: str = "TCP") -> bool:
        if isinstance(source, Node) and source.name == destination.node:
            return True
        return self._egress_allows(source, destination, port, protocol) and self._ingress_allows(
            source, destination, port, protocol
        )

    def why(self, source: Endpoint, destination: Pod, port: int, protocol: str = "TCP") -> str:
        """Which policies admit the flow, for failure messages."""
        selecting = self._selecting(destination, "Ingress")
        if not selecting:
            return f"{destination.name} is not isolated for ingress"
        admitting = [
            p["metadata"]["name"]
            for p in selecting
            if self._rules_admit(p, "ingress", source, destination, port, protocol)
        ]
        return f"selected by {[p['metadata']['name'] for p in selecting]}, admitted by {admitting}"

    # -- semantics -------------------------------------------------------------------------------
    @staticmethod
    def _types(policy: Mapping[str, Any]) -> list[str]:
        spec = policy["spec"]
        if "policyTypes" in spec:
            return list(spec["policyTypes"])
        return ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]

    def _selecting(self, pod: Pod, direction: str) -> list[Mapping[str, Any]]:
        return [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == pod.namespace
            and direction in self._types(p)
            and selector_matches(p["spec"].get("podSelector"), pod.labels)
        ]

    def _ingress_allows(self, source: Endpoint, destination: Pod, port: int, protocol: str) -> bool:
        selecting = self._selecting(destination, "Ingress")
        return not selecting or any(
            self._rules_admit(p, "ingress", source, destination, port, protocol) for p in selecting
        )

    def _egress_allows(self, source: Endpoint, destination: Pod, port: int, protocol: str) -> bool:
        if not isinstance(source, Pod):
            return True  # not a pod: no NetworkPolicy applies on its side
        selecting = self._selecting(source, "Egress")
        return not selecting or any(
            self._rules_admit(p, "egress", destination, destination, port, protocol) for p in selecting
        )

    def _rules_admit(
        self, policy: Mapping[str, Any], direction: str, peer: Endpoint, destination: Pod, port: int, protocol: str
    ) -> bool:
        peers_key = "from" if direction == "ingress" else "to"
        namespace = policy["metadata"]["namespace"]
        for rule in policy["spec"].get(direction) or []:
            peers = rule.get(peers_key) or []
            if peers and not any(self._peer_matches(p, peer, namespace) for p in peers):
                continue
            ports = rule.get("ports") or []
            if ports and not any(self._port_matches(p, destination, port, protocol) for p in ports):
                continue
            return True
        return False

    def _peer_matches(self, peer: Mapping[str, Any], endpoint: Endpoint, policy_namespace: str) -> bool:
        if "ipBlock" in peer:
            block = peer["ipBlock"]
            address = ipaddress.ip_address(endpoint.ip)
            if address not in ipaddress.ip_network(block["cidr"]):
                return False
            return not any(address in ipaddress.ip_network(cidr) for cidr in block.get("except") or [])
        if not isinstance(endpoint, Pod):
            return False  # pod and namespace selectors match pods only
        if "namespaceSelector" in peer:
            if not selector_matches(peer["namespaceSelector"], self.namespace_labels[endpoint.namespace]):
                return False
        elif endpoint.namespace != policy_namespace:
            return False
        return "podSelector" not in peer or selector_matches(peer["podSelector"], endpoint.labels)

    @staticmethod
    def _port_matches(rule_port: Mapping[str, Any], destination: Pod, port: int, protocol: str) -> bool:
        if rule_port.get("protocol", "TCP") != protocol:
            return False
        if "port" not in rule_port:
            return True  # a protocol alone: every port
        start = rule_port["port"]
        if isinstance(start, str):  # a named port of the destination pod's containers
            if rule_port.get("endPort") is not None:
                raise ValueError("endPort needs a numeric port")
            return destination.container_ports.get(start) == port
        return start <= port <= rule_port.get("endPort", start)
