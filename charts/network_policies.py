"""NetworkPolicies of the inference namespace (enforced by the VPC CNI's network policy agent).

Ingress is denied by default; then exactly these flows (each one's source in KubeRay, Ray or vLLM is
cited in tests/charts/test_network_flows.py, which checks every needed flow is admitted and every
other refused):
- Ray pods from Ray pods, every TCP port: GCS 6379, raylet / object manager / agent ports (random by
  default), worker ports 10002-19999 (every actor call, the Serve proxy -> decode -> prefill calls
  included), Serve 8000, dashboard 8265, metrics 8080, and the NIXL side channels from 20000 (prefill)
  and 22000 (decode), plus UCX's ephemeral ports when NIXL runs over UCX;
- the KubeRay operator (its pods in kuberay-system) to the head's dashboard (8265: the Serve config,
  GET/PUT /api/serve/applications/) and Serve (8000: GET /-/healthz, which decides the head's
  `ray.io/serve` label and so the serve Service's endpoints);
- the configured client namespaces to Serve (8000) on the Ray pods;
- the API server's service proxy (the control-plane subnets, which hold nothing but the cluster's ENIs
  and the kubectl provider) to the head's dashboard and to Serve, which `ops verify` uses;
- with observability on, the CloudWatch agent that scrapes the Ray pods (its pods in amazon-cloudwatch,
  labelled by the agent operator) to the metrics port 8080 of every Ray pod, and nothing else.
The kubelet's probes (52365 on every Ray pod) come from the pod's own node, which no policy blocks.
"""
from __future__ import annotations

from typing import Any, Sequence

from config.schema import Serving
from config.topology import (CLOUDWATCH_NAMESPACE, DASHBOARD_PORT, KUBERAY_NAMESPACE, KUBERAY_RELEASE,
                             RAY_METRICS_PORT, RAY_SCRAPER_POD_LABELS, SERVE_PORT)
from config.versions import KUBERAY_OPERATOR

from .ray_pods import ray_pod_labels

NAMESPACE_NAME = "kubernetes.io/metadata.name"
# What the kuberay-operator chart puts on the operator's pods (chart name = name, release name = instance).
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": KUBERAY_OPERATOR.chart, "app.kubernetes.io/instance": KUBERAY_RELEASE}


def _tcp(*ports: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def network_policies(serving: Serving, *, api_proxy_cidrs: Sequence[str],
                     metrics_scraper: bool = False) -> dict[str, dict[str, Any]]:
    """`metrics_scraper`: the stage collects metrics (observability on), so its scraper is admitted."""
    ray = {"matchLabels": ray_pod_labels(serving.service_name)}
    head = {"matchLabels": {**ray_pod_labels(serving.service_name), "ray.io/node-type": "head"}}
    policies: dict[str, dict[str, Any]] = {
        "default-deny-ingress": {"podSelector": {}, "policyTypes": ["Ingress"]},
        "ray-pods": {"podSelector": ray, "policyTypes": ["Ingress"], "ingress": [{"from": [{"podSelector": ray}]}]},
        "kuberay-operator": {"podSelector": head, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: KUBERAY_NAMESPACE}},
                      "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)}}],
            "ports": _tcp(DASHBOARD_PORT, SERVE_PORT)}]},
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
    if metrics_scraper:
        policies["metrics-scraper"] = {"podSelector": ray, "policyTypes": ["Ingress"], "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: CLOUDWATCH_NAMESPACE}},
                      "podSelector": {"matchLabels": dict(RAY_SCRAPER_POD_LABELS)}}],
            "ports": _tcp(RAY_METRICS_PORT)}]}
    return policies
