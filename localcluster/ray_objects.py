"""What the KubeRay operator made of a RayService, read from the API server: its RayCluster, pods, Services
and EndpointSlices, and its conditions. Names and labels are KubeRay 1.6.2's (ray-operator/controllers/ray/
utils/constant.go: ray.io/cluster, ray.io/node-type; common/service.go: `<name>-head-svc`, `<name>-serve-svc`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clients.kube import KubeApi, KubeError
from config.topology import head_service, serve_service

from .control_plane import ClusterError

CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"  # set by the EndpointSlice controller


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of that type, or {}."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def is_ready(service: dict[str, Any]) -> bool:
    return condition(service, "Ready").get("status") == "True"


@dataclass(frozen=True)
class MadeObjects:
    """One RayService's objects as the operator made them."""

    service: dict[str, Any]
    cluster: dict[str, Any]
    pods: list[dict[str, Any]]
    services: dict[str, dict[str, Any]]  # by name: the stable head and serve Services, the per-cluster head one
    endpoint_slices: dict[str, list[dict[str, Any]]]  # by Service name

    @property
    def cluster_name(self) -> str:
        return self.cluster["metadata"]["name"]

    def pods_of(self, node_type: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["metadata"]["labels"].get(NODE_TYPE_LABEL) == node_type]


def _get(api: KubeApi, path: str) -> dict[str, Any] | None:
    try:
        return api.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


def ray_service(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    return _get(api, f"/apis/ray.io/v1/namespaces/{namespace}/rayservices/{name}")


def ray_clusters(api: KubeApi, namespace: str) -> list[dict[str, Any]]:
    return api.get(f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters")["items"]


def pods(api: KubeApi, namespace: str, cluster_name: str) -> list[dict[str, Any]]:
    return api.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{CLUSTER_LABEL}={cluster_name}")["items"]


def read(api: KubeApi, namespace: str, name: str) -> MadeObjects:
    """The RayService and what hangs off its active RayCluster (ClusterError when it has none yet)."""
    service = ray_service(api, namespace, name) or {}
    active = ((service.get("status") or {}).get("activeServiceStatus") or {}).get("rayClusterName")
    if not active:
        raise ClusterError(f"RayService {namespace}/{name} has no active RayCluster")
    cluster = api.get(f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{active}")
    names = (head_service(name), serve_service(name), f"{active}-head-svc")
    services = {n: s for n in names if (s := _get(api, f"/api/v1/namespaces/{namespace}/services/{n}"))}
    slices = {
        n: api.get(
            f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
            labelSelector=f"{SERVICE_NAME_LABEL}={n}",
        )["items"]
        for n in services
    }
    return MadeObjects(service, cluster, pods(api, namespace, active), services, slices)


def ready_addresses(slices: list[dict[str, Any]]) -> set[str]:
    """The addresses of every ready endpoint of a Service's EndpointSlices."""
    return {
        address
        for piece in slices
        for endpoint in piece.get("endpoints") or []
        if (endpoint.get("conditions") or {}).get("ready")
        for address in endpoint.get("addresses") or []
    }


def selects(service: dict[str, Any], pod: dict[str, Any]) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def wait_until(done: Callable[[], Any], what: str, timeout: float = 90.0, alive: Callable[[], None] = lambda: None):
    """Poll `done` until it returns something truthy, which is returned; ClusterError naming `what` after
    `timeout` s. `alive` raises when a process the wait depends on has died."""
    deadline = time.monotonic() + timeout
    while True:
        alive()
        found = done()
        if found:
            return found
        if time.monotonic() > deadline:
            raise ClusterError(f"{what} within {timeout:g} s")
        time.sleep(0.5)
