"""NetworkPolicies of the inference namespace (enforced by the VPC CNI's network policy agent).

Ingress is denied by default; then exactly these flows (each one's source in KubeRay, Ray or vLLM is
cited in tests/charts/test_network_flows.py, which checks every needed flow is admitted and every
other refused):
- Ray pods from Ray pods, every TCP port: GCS 6379, raylet / object manager / agent ports (random by
  default), worker ports 10002-19999 (every actor call, the Serve proxy -> decode -> prefill calls
  included), Serve 8000, Serve's direct ingress 30000-31000 (HAProxy -> the ingress replica, with
  serving.serve_ingress haproxy), dashboard 8265, metrics 8080, and the NIXL side channels from 20000 (prefill)
  and 22000 (decode), plus UCX's ephemeral ports when NIXL runs over UCX;
- the KubeRay operator (its pods in kuberay-system) to the head's dashboard (8265: the Serve config,
  GET/PUT /api/serve/applications/) and Serve (8000: GET /-/healthz, which decides the head's
  `ray.io/serve` label and so the serve Service's endpoints);
- the configured client namespaces to Serve (8000) on the Ray pods;
- the API server's service proxy (the control-plane subnets, which hold nothing but the cluster's ENIs
  and the kubectl provider) to the head's dashboard and to Serve, which `ops verify` uses;
- with observability on, the CloudWatch agent that scrapes the Ray pods (its pods in amazon-cloudwatch,
  labelled by the agent operator) to the metrics port 8080 of every Ray pod, and nothing else;
- in PD mode, NIXL's exporter port on the GPU workers (config/topology.py NIXL_METRICS_PORT) from that
  scraper and from the API server's pod proxy (`ops verify`'s rate check), and from nothing else.
The kubelet's probes (52365 on every Ray pod) come from the pod's own node, which no policy blocks.

Typed core objects (cdk8s-plus-28's `k8s.KubeNetworkPolicy` and its spec classes): a misspelt field fails
where the policy is built. Not cdk8s-plus's L2 `NetworkPolicy`: it writes one rule per peer, where the
API-server rule is one rule of several ipBlocks and one port list (docs/DECISIONS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk8s_plus_28 import k8s
from constructs import Construct

from config.schema import Serving
from config.topology import (
    CLOUDWATCH_NAMESPACE,
    DASHBOARD_PORT,
    KUBERAY_NAMESPACE,
    KUBERAY_RELEASE,
    NIXL_METRICS_PORT,
    RAY_METRICS_PORT,
    RAY_SCRAPER_POD_LABELS,
    SERVE_PORT,
)
from config.versions import KUBERAY_OPERATOR

from .ray_pods import ray_pod_labels

NAMESPACE_NAME = "kubernetes.io/metadata.name"
# What the kuberay-operator chart puts on the operator's pods (chart name = name, release name = instance).
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": KUBERAY_OPERATOR.chart, "app.kubernetes.io/instance": KUBERAY_RELEASE}


def _tcp(*ports: int) -> list[k8s.NetworkPolicyPort]:
    return [k8s.NetworkPolicyPort(protocol="TCP", port=k8s.IntOrString.from_number(port)) for port in ports]


def _labels(labels: dict[str, str]) -> k8s.LabelSelector:
    return k8s.LabelSelector(match_labels=dict(labels))


def _from_namespace(namespace: str, pods: dict[str, str]) -> k8s.NetworkPolicyPeer:
    """Pods with these labels in that namespace (both selectors in one peer: AND)."""
    return k8s.NetworkPolicyPeer(namespace_selector=_labels({NAMESPACE_NAME: namespace}), pod_selector=_labels(pods))


def _ingress(
    selector: k8s.LabelSelector,
    peers: list[k8s.NetworkPolicyPeer] | None = None,
    ports: list[k8s.NetworkPolicyPort] | None = None,
) -> k8s.NetworkPolicySpec:
    """Ingress to the selected pods from the peers on the ports; no peers and no ports: deny all."""
    rules = None if peers is None else [k8s.NetworkPolicyIngressRule(from_=peers, ports=ports)]
    return k8s.NetworkPolicySpec(pod_selector=selector, policy_types=["Ingress"], ingress=rules)


def network_policies(
    serving: Serving, *, api_proxy_cidrs: Sequence[str], metrics_scraper: bool = False
) -> dict[str, k8s.NetworkPolicySpec]:
    """The policies by name. `metrics_scraper`: the stage collects metrics (observability on), so its
    scraper is admitted."""
    ray = _labels(ray_pod_labels(serving.service_name))
    # KubeRay labels the head pod ray.io/node-type=head (utils/constant.go RayNodeTypeLabelKey, common/pod.go).
    head = _labels({**ray_pod_labels(serving.service_name), "ray.io/node-type": "head"})
    policies = {
        "default-deny-ingress": _ingress(k8s.LabelSelector()),
        "ray-pods": _ingress(ray, [k8s.NetworkPolicyPeer(pod_selector=ray)]),
        "kuberay-operator": _ingress(
            head, [_from_namespace(KUBERAY_NAMESPACE, OPERATOR_POD_LABELS)], _tcp(DASHBOARD_PORT, SERVE_PORT)
        ),
    }
    if serving.client_namespaces:
        clients = k8s.LabelSelector(
            match_expressions=[
                k8s.LabelSelectorRequirement(key=NAMESPACE_NAME, operator="In", values=list(serving.client_namespaces))
            ]
        )
        policies["serve-clients"] = _ingress(ray, [k8s.NetworkPolicyPeer(namespace_selector=clients)], _tcp(SERVE_PORT))
    if api_proxy_cidrs:
        sources = [k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=cidr)) for cidr in api_proxy_cidrs]
        # Serve answers on every Ray pod that runs a Serve proxy; the dashboard only on the head.
        policies["api-server-proxy-serve"] = _ingress(ray, sources, _tcp(SERVE_PORT))
        policies["api-server-proxy-dashboard"] = _ingress(head, sources, _tcp(DASHBOARD_PORT))
    if metrics_scraper:
        policies["metrics-scraper"] = _ingress(
            ray, [_from_namespace(CLOUDWATCH_NAMESPACE, RAY_SCRAPER_POD_LABELS)], _tcp(RAY_METRICS_PORT)
        )
    if serving.mode == "pd":
        policies.update(nixl_exporter_policies(serving, api_proxy_cidrs, metrics_scraper=metrics_scraper))
    return policies


def nixl_exporter_policies(
    serving: Serving, api_proxy_cidrs: Sequence[str], *, metrics_scraper: bool
) -> dict[str, k8s.NetworkPolicySpec]:
    """NIXL's exporter runs on the GPU workers only (KubeRay labels them ray.io/node-type=worker): the scraper
    and the API server's pod proxy (verify's rate check) reach that one port there."""
    workers = _labels({**ray_pod_labels(serving.service_name), "ray.io/node-type": "worker"})
    policies = {}
    if api_proxy_cidrs:
        sources = [k8s.NetworkPolicyPeer(ip_block=k8s.IpBlock(cidr=cidr)) for cidr in api_proxy_cidrs]
        policies["api-server-proxy-nixl-metrics"] = _ingress(workers, sources, _tcp(NIXL_METRICS_PORT))
    if metrics_scraper:
        scraper = [_from_namespace(CLOUDWATCH_NAMESPACE, RAY_SCRAPER_POD_LABELS)]
        policies["metrics-scraper-nixl"] = _ingress(workers, scraper, _tcp(NIXL_METRICS_PORT))
    return policies


def add_network_policies(scope: Construct, namespace: str, policies: dict[str, k8s.NetworkPolicySpec]) -> None:
    for name, spec in policies.items():
        k8s.KubeNetworkPolicy(
            scope, f"Policy-{name}", metadata=k8s.ObjectMeta(name=name, namespace=namespace), spec=spec
        )
