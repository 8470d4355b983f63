"""The KubeRay operator, run out of cluster exactly as the chart's Deployment runs it in cluster.

Its Deployment (installed by Helm into the local cluster, its pod kept Running by kwok) gives the arguments
and the environment; the process here gets those, with the chart's ServiceAccount token (a TokenRequest, so
the chart's RBAC is what is proven, never the admin's rights) and these out-of-cluster changes only:
- `--kubeconfig` with that token (in cluster: the mounted token; controller-runtime's config flag);
- `--leader-election-namespace` = the release's namespace (in cluster it defaults to the pod's namespace:
  ray-operator/main.go, flag leader-election-namespace), so the chart's leader-election Role is used;
- metrics and probe ports on loopback, free ones (in cluster :8080 and :8082 of the pod);
- HTTP_PROXY and HTTPS_PROXY to the stand-in Ray head (ray_head.py), NO_PROXY empty: Go's proxy rules never
  proxy loopback (golang.org/x/net/http/httpproxy), so the API server is reached directly and every other
  address, pod IPs and `*.svc.cluster.local` names included, goes to the stand-in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clients.kube import KubeApi, KubeError

from .control_plane import ClusterError, LocalCluster, Process, free_port
from .pki import LOOPBACK
from .ray_objects import wait_until

# Flags the out-of-cluster run sets itself (ray-operator/main.go); the chart's own values are dropped.
OWN_FLAGS = ("--metrics-addr", "--health-probe-bind-address", "--leader-election-namespace", "--kubeconfig")
TOKEN_SECONDS = 3600


@dataclass(frozen=True)
class ChartContainer:
    """What the chart's Deployment runs: its ServiceAccount, arguments and plain environment values."""

    namespace: str
    service_account: str
    args: tuple[str, ...]
    env: dict[str, str]


def chart_container(api: KubeApi, namespace: str, deployment: str) -> ChartContainer:
    """The operator container of the Deployment Helm installed. A value taken from elsewhere (valueFrom) has
    no meaning out of cluster and stops the run with its name."""
    found = api.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}")
    pod = found["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {}
    for item in container.get("env") or []:
        if "value" not in item:
            raise ClusterError(f"the operator's env {item['name']} is not a plain value: no out-of-cluster run for it")
        env[item["name"]] = item["value"]
    return ChartContainer(namespace, pod.get("serviceAccountName", "default"), tuple(container.get("args") or ()), env)


def service_account_token(api: KubeApi, namespace: str, name: str, seconds: int = TOKEN_SECONDS) -> str:
    """A token of the ServiceAccount, as the kubelet would mount it (TokenRequest API)."""
    answer = api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}},
    )
    return answer["status"]["token"]


def argv(binary: Path, container: ChartContainer, kubeconfig: Path) -> list[str]:
    """The chart's arguments, less the flags OWN_FLAGS names, and the out-of-cluster ones."""
    kept = [arg for arg in container.args if arg.split("=", 1)[0] not in OWN_FLAGS]
    return [
        str(binary),
        *kept,
        f"--kubeconfig={kubeconfig}",
        f"--leader-election-namespace={container.namespace}",
        f"--metrics-addr={LOOPBACK}:{free_port()}",
        f"--health-probe-bind-address={LOOPBACK}:{free_port()}",
    ]


def environment(container: ChartContainer, proxy: str) -> dict[str, str]:
    """The chart's environment and the proxy settings that keep every Ray call on the stand-in."""
    proxies = {name: proxy for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")}
    return {**container.env, **proxies, "NO_PROXY": "", "no_proxy": ""}


def start(
    cluster: LocalCluster, binary: Path, *, namespace: str, deployment: str, proxy: str
) -> tuple[Process, ChartContainer]:
    """The operator process, with the chart's ServiceAccount token; returns once it holds its leader lease."""
    api = cluster.api()
    container = chart_container(api, namespace, deployment)
    token = service_account_token(api, namespace, container.service_account)
    kubeconfig = cluster.token_kubeconfig("kuberay-operator", token)
    process = cluster.start("kuberay-operator", argv(binary, container, kubeconfig), env=environment(container, proxy))
    try:
        wait_until(lambda: _lease_holder(api, namespace), "the operator's leader lease", alive=cluster.check_alive)
    except ClusterError as exc:
        raise ClusterError(f"{exc}\n{process.tail()}") from None
    return process, container


def _lease_holder(api: KubeApi, namespace: str) -> str | None:
    # ray-operator/main.go: LeaderElectionID "ray-operator-leader" (a coordination.k8s.io Lease).
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/ray-operator-leader"
    try:
        lease: dict[str, Any] = api.get(path)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise
    return (lease.get("spec") or {}).get("holderIdentity")
