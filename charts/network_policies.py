"""NetworkPolicies of the inference namespace (enforced by the VPC CNI's network policy agent).

Ingress is denied by default; then exactly:
- Ray pods from Ray pods, every port (GCS 6379, raylet and object store, Serve 8000, dashboard 8265,
  and the NIXL side channels from 20000 (prefill) and 22000 (decode));
- the KubeRay operator (namespace kuberay-system) to the head's dashboard (8265) and agent (52365);
- the configured client namespaces to Serve (8000) on the Ray pods;
- the API server's service proxy (the control-plane subnets, which hold nothing but the cluster's ENIs
  and the kubectl provider) to the head's dashboard and to Serve, which `ops verify` uses.
"""
from __future__ import annotations

from typing import Any, Sequence

from config.schema import Serving
from config.topology import KUBERAY_NAMESPACE

from .ray_pods import ray_pod_labels

DASHBOARD_PORT, AGENT_PORT, SERVE_PORT = 8265, 52365, 8000
NAMESPACE_NAME = "kubernetes.io/metadata.name"


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def network_policies(serving: Serving, *, api_proxy_cidrs: Sequence[str]) -> dict[str, dict[str, Any]]:
    ray = {"matchLabels": ray_pod_labels(serving.service_name)}
    head = {"matchLabels": {**ray_pod_labels(serving.service_name), "ray.io/node-type": "head"}}
    policies: dict[str, dict[str, Any]] = {
        "default-deny-ingress": {"podSelector": {}, "policyTypes": ["Ingress"]},
        "ray-pods": {"podSelector": ray, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": ray}]}]},
        "kuberay-operator": {"podSelector": head, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: KUBERAY_NAMESPACE}},
                      "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kuberay-operator"}}}],
            "ports": _tcp(DASHBOARD_PORT, AGENT_PORT)}]},
    }
    if serving.client_namespaces:
        policies["serve-clients"] = {"podSelector": ray, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"namespaceSelector": {"matchExpressions": [
                {"key": NAMESPACE_NAME, "operator": "In", "values": list(serving.client_namespaces)}]}}],
            "ports": _tcp(SERVE_PORT)}]}
    if api_proxy_cidrs:
        sources = [{"ipBlock": {"cidr": cidr}} for cidr in api_proxy_cidrs]
        # Serve answers on every Ray pod that runs a Serve proxy; the dashboard only on the head.
        policies["api-server-proxy-serve"] = {"podSelector": ray, "policyTypes": ["Ingress"], "ingress": [
            {"from": sources, "ports": _tcp(SERVE_PORT)}]}
        policies["api-server-proxy-dashboard"] = {"podSelector": head, "policyTypes": ["Ingress"], "ingress": [
            {"from": sources, "ports": _tcp(DASHBOARD_PORT)}]}
    return policies
