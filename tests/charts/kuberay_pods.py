"""The Ray pods as KubeRay 1.6.2 creates them from our RayService, for the flow matrix.

Labels (ray-operator/controllers/ray/common/pod.go, labelPod, and utils/constant.go at 1.6.2; held to the real operator's pods by tests/cluster/test_network_flows.py):
KubeRay sets ray.io/is-ray-node=yes, ray.io/node-type (head|worker), ray.io/group (headgroup or the
worker group's name), ray.io/cluster (the RayCluster's name: `<rayservice>-<5 random characters>`,
new on every cluster recreation), ray.io/identifier (`<cluster>-<node type>`),
app.kubernetes.io/name=kuberay and app.kubernetes.io/created-by=kuberay-operator. The pod template's
labels are merged in and override every default except node-type, group and cluster ("The following
labels are not overridable"). The RayService controller flips ray.io/serve on the head from the
/-/healthz answer; workers carry ray.io/serve=true. KubeRay adds a `metrics` container port 8080 to
every Ray container (pod.go) and serves the dashboard agent on 52365 (dashboard-agent-listen-port).

The operator pod's labels come from helm-chart/kuberay-operator/templates/deployment.yaml and
_helpers.tpl (1.6.2): name, instance (the release) and component.
"""

from __future__ import annotations

from typing import Any

from .netpol import Pod

CLUSTER = "ray-llm-x7k2p"  # KubeRay's generated RayCluster name: never stable, never selected on
HEAD_GROUP = "headgroup"


def _ports(template: dict[str, Any]) -> dict[str, int]:
    # KubeRay treats the first container as Ray's (utils.RayContainerIndex) and adds its ports there; the
    # workers' log relay, second, listens on nothing.
    container = template["spec"]["containers"][0]
    assert all(not other.get("ports") for other in template["spec"]["containers"][1:])
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    ports.setdefault("metrics", 8080)
    return ports


def kuberay_pod(
    template: dict[str, Any], *, name: str, namespace: str, node_type: str, group: str, ip: str, node: str
) -> Pod:
    defaults = {
        "ray.io/is-ray-node": "yes",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
        "ray.io/identifier": f"{CLUSTER}-{node_type}",
        "ray.io/serve": "true",
    }
    labels = {
        **defaults,
        **template["metadata"].get("labels", {}),
        "ray.io/cluster": CLUSTER,
        "ray.io/node-type": node_type,
        "ray.io/group": group,
    }
    return Pod(name, namespace, labels, ip, _ports(template), node)


def operator_pod(release: str, namespace: str, ip: str) -> Pod:
    return Pod(
        "kuberay-operator",
        namespace,
        {
            "app.kubernetes.io/name": "kuberay-operator",
            "app.kubernetes.io/instance": release,
            "app.kubernetes.io/component": "kuberay-operator",
        },
        ip,
        {"http": 8080},
        "system-node",
    )
