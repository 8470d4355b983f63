"""The readiness checks of a stage's cluster through the Kubernetes API: GPU nodes Ready with their devices,
the KubeRay operator available, the RayService ready with its application RUNNING. `verify` runs them on the
deployed stage (ops/verify.py), ops local-cluster on its local control plane (localcluster/checks.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .kube import KubeApi, KubeError, unexpected
from .report import Report

# What reading a JSON answer of the wrong shape raises (a field missing, a string where a list belongs):
# caught only around the reading of an answer, where it means the server, not this code, is wrong.
SHAPE_ERRORS = (KeyError, IndexError, TypeError, AttributeError, ValueError)


@dataclass(frozen=True)
class Target:
    """What the checks expect of the cluster, as plain values: clients/ knows no stage file (charts/readiness.py)."""

    stage: str
    gpu_selector: str
    gpu_nodes: int
    gpu_resource: str
    gpus: int  # allocatable on each GPU node, as efa_interfaces (0: no EFA)
    efa_resource: str
    efa_interfaces: int
    operator_namespace: str
    operator_release: str
    namespace: str
    service_name: str
    app_name: str


def count(value: object) -> int:
    """A Kubernetes quantity that counts devices ("1", 1)."""
    return int(str(value))


def kube_fix(exc: KubeError, default: str = "") -> str:
    """The fix for a failed Kubernetes request, by its cause; `default` for a 404 (the object is missing)."""
    if exc.kind == "http" and exc.status == 401:
        return (
            "the API server refused the token: these credentials need an EKS access entry "
            "(cluster.admin_principal_arns) on this cluster"
        )
    if exc.kind == "http" and exc.status == 403:
        return (
            "the identity may not read this: add it to cluster.admin_principal_arns, or use the verify runner "
            "(verify-remote), whose access entry has the read-only verify role"
        )
    if exc.kind == "http" and exc.status is not None and 300 <= exc.status < 400:
        return (
            "verify follows no redirect (it would carry the token to another host): check what answers at "
            "that address (a proxy in between? check HTTPS_PROXY)"
        )
    if exc.kind == "answer":
        return "the endpoint did not answer as a Kubernetes API server: a proxy in between? (check HTTPS_PROXY)"
    if exc.kind == "transport":
        return "the API server stopped answering: run verify again; if it persists, check the network path to it"
    return default


def read_failed(report: Report, name: str, path: str, exc: Exception, missing: str = "") -> None:
    """A check's GET failed: the API's own error (with `missing` as the fix for a 404), or an answer of
    the wrong shape."""
    if isinstance(exc, KubeError):
        report.add(name, "fail", str(exc), kube_fix(exc, missing))
    else:
        error = unexpected(f"GET {path}", exc)
        report.add(name, "fail", str(error), kube_fix(error))


def gpu_nodes(target: Target, api: KubeApi, report: Report) -> None:
    name = "GPU nodes"
    gpu, efa = target.gpu_resource, target.efa_resource
    try:
        answer = api.get("/api/v1/nodes", labelSelector=target.gpu_selector)
        problems = []
        nodes = answer["items"]
        for node in nodes:
            node_name = node["metadata"]["name"]
            status = node.get("status") or {}
            conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
            allocatable = status.get("allocatable") or {}
            if conditions.get("Ready") != "True":
                problems.append(f"{node_name} not Ready")
            if count(allocatable.get(gpu, "0")) < target.gpus:
                problems.append(
                    f"{node_name} has {allocatable.get(gpu, '0')} {gpu} allocatable (NVIDIA device plugin running?)"
                )
            if target.efa_interfaces and count(allocatable.get(efa, "0")) < target.efa_interfaces:
                problems.append(
                    f"{node_name} has {allocatable.get(efa, '0')} {efa} allocatable (EFA device plugin running?)"
                )
    except (KubeError, *SHAPE_ERRORS) as exc:
        read_failed(report, name, "/api/v1/nodes", exc)
        return
    if len(nodes) < target.gpu_nodes:
        problems.insert(0, f"{len(nodes)} of {target.gpu_nodes} GPU nodes registered")
    if problems:
        report.add(
            name,
            "fail",
            "; ".join(problems),
            "check the GPU nodegroup in the EKS console and the device plugin pods in kube-system",
        )
    else:
        devices = f"{target.gpus} GPU" + (f", {target.efa_interfaces} EFA" if target.efa_interfaces else "")
        report.add(name, "pass", f"{len(nodes)} nodes Ready, each with {devices} allocatable")


def kuberay_operator(target: Target, api: KubeApi, report: Report) -> None:
    name = "KubeRay operator"
    namespace, release = target.operator_namespace, target.operator_release
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{release}"
    try:
        deployment = api.get(path)
        available = count((deployment.get("status") or {}).get("availableReplicas") or 0)
    except (KubeError, *SHAPE_ERRORS) as exc:
        read_failed(
            report,
            name,
            path,
            exc,
            f"the {release} Helm release is missing: deploy the cluster stack (it installs the operator)",
        )
        return
    if available >= 1:
        report.add(name, "pass", f"{available} replica(s) available in {namespace}")
    else:
        report.add(
            name,
            "fail",
            "no available replica",
            f"see why the operator pod does not start: kubectl -n {namespace} describe pods",
        )


def ray_service(target: Target, api: KubeApi, report: Report) -> None:
    name = "RayService"
    service, app_name = target.service_name, target.app_name
    path = f"/apis/ray.io/v1/namespaces/{target.namespace}/rayservices/{service}"
    try:
        status = api.get(path).get("status") or {}
        condition: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        ready = condition.get("status") == "True"
        app = ((status.get("activeServiceStatus") or {}).get("applicationStatuses") or {}).get(app_name) or {}
        app_status = str(app.get("status", "absent"))
    except (KubeError, *SHAPE_ERRORS) as exc:
        read_failed(
            report,
            name,
            path,
            exc,
            "the RayService is missing: deploy the serving stack "
            f"(scripts/cdk deploy -c stage={target.stage} '{target.stage}/Serving')",
        )
        return
    if ready and app_status == "RUNNING":
        report.add(name, "pass", f"{service} Ready, application {app_name} RUNNING")
    else:
        message = " ".join(str(app.get("message", "")).split())[:200]
        # Why the operator holds it back (e.g. ValidationFailed: an upgrade strategy it does not know).
        reason, detail = condition.get("reason", ""), condition.get("message", "")
        why = " ".join(f"{reason}: {detail}".split() if detail else str(reason).split())[:200]  # any JSON type: str()
        report.add(
            name,
            "fail",
            f"{service} ready={ready}, application {app_name} {app_status}"
            + (f": {message}" if message else "")
            + (f" (Ready: {why})" if not ready and condition.get("reason") else ""),
            f"kubectl -n {target.namespace} describe rayservice {service}",
        )
