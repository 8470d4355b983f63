"""What the real API server and the real KubeRay operator say of the stage once it is applied: the
operator's verdict on the RayService (Ready, and the RayCluster, pods, Services and EndpointSlices it made),
the Serve config it PUT to the head, Pod Security on the pods it made, the verify group's rights
(SubjectAccessReviews) and `ops verify`'s Kubernetes checks with the verify group's token over TLS."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from charts.readiness import readiness_target
from clients import readiness
from clients.kube import KubeError
from clients.report import Report
from config.schema import StageConfig
from config.topology import (
    DASHBOARD_PORT,
    DASHBOARD_PORT_NAME,
    KUBERAY_NAMESPACE,
    KUBERAY_RELEASE,
    NIXL_METRICS_PORT,
    SERVE_PORT_NAME,
    VERIFY_GROUP,
    head_service,
    serve_service,
)

from . import ray_objects
from .control_plane import ClusterError, LocalCluster
from .ray_head import RayHeadStandIn

READY_TIMEOUT = 120.0


# What `ops verify` does through the API, as (verb, resource, subresource, namespace, name): each must be
# allowed for the verify group. ops/verify.py (clients/readiness.py) makes exactly these requests.
def verify_requests(cfg: StageConfig) -> list[tuple[str, str, str, str, str]]:
    serving = cfg.serving
    dashboard = f"{head_service(serving.service_name)}:{DASHBOARD_PORT_NAME}"
    serve = f"{serve_service(serving.service_name)}:{SERVE_PORT_NAME}"
    return [
        ("list", "nodes", "", "", ""),
        ("get", "deployments", "", KUBERAY_NAMESPACE, KUBERAY_RELEASE),
        ("get", "rayservices", "", serving.namespace, serving.service_name),
        ("get", "services", "proxy", serving.namespace, dashboard),
        ("get", "services", "proxy", serving.namespace, serve),
        ("create", "services", "proxy", serving.namespace, serve),
        # the rate check (ops/verify_rate.py): the GPU workers, and NIXL's exporter through the pod proxy
        ("list", "pods", "", serving.namespace, ""),
        ("get", "pods", "proxy", serving.namespace, f"{serving.service_name}-gpu-worker-x7k2p:{NIXL_METRICS_PORT}"),
    ]


# What the verify group must not do: read secrets, exec into pods, write anything, POST to the dashboard
# (its job API runs code), reach any other service or namespace through the proxy.
def forbidden_requests(cfg: StageConfig) -> list[tuple[str, str, str, str, str]]:
    serving = cfg.serving
    dashboard = f"{head_service(serving.service_name)}:{DASHBOARD_PORT_NAME}"
    return [
        ("get", "secrets", "", serving.namespace, ""),
        ("list", "secrets", "", "", ""),
        ("create", "pods", "exec", serving.namespace, ""),
        ("create", "services", "proxy", serving.namespace, dashboard),
        ("get", "services", "proxy", serving.namespace, f"{head_service(serving.service_name)}:gcs-server"),
        ("get", "services", "proxy", "kube-system", "kube-dns:dns"),
        ("patch", "rayservices", "", serving.namespace, serving.service_name),
        ("delete", "rayservices", "", serving.namespace, serving.service_name),
        ("get", "rayservices", "", "default", serving.service_name),
        ("update", "deployments", "", KUBERAY_NAMESPACE, KUBERAY_RELEASE),
        ("get", "deployments", "", "kube-system", "coredns"),
        ("create", "pods", "", serving.namespace, ""),
        ("delete", "nodes", "", "", ""),
        ("create", "pods", "proxy", serving.namespace, f"{serving.service_name}-gpu-worker-x7k2p:{NIXL_METRICS_PORT}"),
        ("get", "pods", "proxy", "kube-system", "coredns-5d78c9869d-abcde:53"),
        ("list", "pods", "", "kube-system", ""),
    ]


def access_review(cluster: LocalCluster, group: str, request: tuple[str, str, str, str, str]) -> bool:
    """A SubjectAccessReview for a user in `group` (the API server's RBAC authorizer decides)."""
    verb, resource, subresource, namespace, name = request
    group_of = {"deployments": "apps", "rayservices": "ray.io"}.get(resource, "")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "rehearsal-verify",
            "groups": [group, "system:authenticated"],
            "resourceAttributes": {
                "verb": verb,
                "group": group_of,
                "resource": resource,
                "subresource": subresource,
                "namespace": namespace,
                "name": name,
            },
        },
    }
    answer = cluster.api().request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(answer["status"].get("allowed"))


def describe_request(request: tuple[str, str, str, str, str]) -> str:
    verb, resource, subresource, namespace, name = request
    what = resource + (f"/{subresource}" if subresource else "")
    return f"{verb} {what}" + (f" {name}" if name else "") + (f" in {namespace}" if namespace else "")


def expected_pods(service: dict[str, Any]) -> int:
    """The head and every worker replica the RayService's cluster spec asks for."""
    groups = service["spec"]["rayClusterConfig"].get("workerGroupSpecs") or []
    return 1 + sum(int(g.get("replicas", 1)) for g in groups)


def wait_ready(cluster: LocalCluster, namespace: str, name: str, timeout: float = READY_TIMEOUT):
    """The operator's objects once the RayService is Ready and every pod it asks for is Running."""
    api = cluster.api()

    def made():
        service = ray_objects.ray_service(api, namespace, name)
        if not service or not ray_objects.is_ready(service):
            return None
        try:
            objects = ray_objects.read(api, namespace, name)
        except KubeError as exc:
            if exc.status == 404:  # status still names a RayCluster just deleted: the operator has not caught up
                return None
            raise
        running = [p for p in objects.pods if (p.get("status") or {}).get("phase") == "Running"]
        return objects if len(running) == expected_pods(service) else None

    return ray_objects.wait_until(made, f"RayService {namespace}/{name} Ready", timeout, cluster.check_alive)


def operator_verdict(cfg: StageConfig, cluster: LocalCluster, report: Report):
    """The RayService Ready, or why not (its Ready condition and the operator's last lines); its objects."""
    serving = cfg.serving
    try:
        made = wait_ready(cluster, serving.namespace, serving.service_name)
    except ClusterError as exc:
        service = ray_objects.ray_service(cluster.api(), serving.namespace, serving.service_name) or {}
        ready = ray_objects.condition(service, "Ready")
        process = cluster.process("kuberay-operator")
        report.add(
            "KubeRay operator",
            "fail",
            f"{exc}: Ready={ready.get('status', 'absent')} ({ready.get('reason', '')}: {ready.get('message', '')})",
            process.tail() if process else "the operator is not running",
        )
        return None
    report.add(
        "KubeRay operator",
        "pass",
        f"RayService {serving.service_name} Ready: RayCluster {made.cluster_name}, {len(made.pods_of('head'))} head "
        f"and {len(made.pods_of('worker'))} worker pods Running, Services {', '.join(sorted(made.services))}",
    )
    return made


def service_problems(made: ray_objects.MadeObjects) -> list[str]:
    """Each Service the operator made selects pods, and its EndpointSlices hold exactly their addresses."""
    problems = []
    for name, service in sorted(made.services.items()):
        selected = {p["status"].get("podIP") for p in made.pods if ray_objects.selects(service, p)}
        if not selected:
            problems.append(f"{name} selects no pod")
        elif ray_objects.ready_addresses(made.endpoint_slices[name]) != selected:
            problems.append(f"{name}: EndpointSlices {sorted(ray_objects.ready_addresses(made.endpoint_slices[name]))}")
    return problems


def check_services(made: ray_objects.MadeObjects, report: Report) -> None:
    problems = service_problems(made)
    if problems:
        report.add("RayService Services", "fail", "; ".join(problems))
    else:
        report.add(
            "RayService Services",
            "pass",
            f"{len(made.services)} Services select the operator's pods; their EndpointSlices hold exactly them",
        )


def serve_config_host(made: ray_objects.MadeObjects) -> str:
    """Where the operator sends the Serve config: the per-cluster head Service's dashboard port
    (utils/util.go FetchHeadServiceURL)."""
    namespace = made.cluster["metadata"]["namespace"]
    return f"{made.cluster_name}-head-svc.{namespace}.svc.cluster.local:{DASHBOARD_PORT}"


def put_bodies(head: RayHeadStandIn, made: ray_objects.MadeObjects) -> list[Any]:
    """Every Serve config the operator PUT to this cluster's head, parsed."""
    host = serve_config_host(made)
    return [json.loads(call.body) for call in head.state.puts() if call.host == host]


def check_serve_config(made: ray_objects.MadeObjects, head: RayHeadStandIn, report: Report) -> None:
    rendered = yaml.safe_load(made.service["spec"]["serveConfigV2"])
    bodies = put_bodies(head, made)
    if bodies and all(body == rendered for body in bodies):
        report.add("Serve config PUT", "pass", f"{len(bodies)} PUT to {serve_config_host(made)}: the rendered config")
    else:
        report.add(
            "Serve config PUT", "fail", f"{len(bodies)} PUT to {serve_config_host(made)}, not the rendered config"
        )


def check_stand_in_calls(head: RayHeadStandIn, report: Report) -> None:
    unexpected = head.state.unexpected()
    if unexpected:
        calls = sorted({f"{c.method} {c.host}{c.path} ({c.status})" for c in unexpected})
        report.add("operator's calls", "fail", f"calls the stand-in Ray head does not know: {', '.join(calls)}")
    else:
        kinds = sorted({f"{c.method} {c.path}" for c in head.state.calls})
        report.add("operator's calls", "pass", f"only {', '.join(kinds)} ({len(head.state.calls)} calls)")


def pod_security_refusals(cluster: LocalCluster, namespace: str) -> list[str]:
    """What Pod Security refused in the namespace: the operator's events for the pods it could not create
    (KubeRay records the API server's answer in them)."""
    events = cluster.api().get(f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e.get("message", "") for e in events if "violates PodSecurity" in (e.get("message") or "")]


def check_pod_security(
    cfg: StageConfig, cluster: LocalCluster, made: ray_objects.MadeObjects | None, report: Report
) -> None:
    """The operator's pods were admitted at the serving namespace's enforce level: no refusal in its events."""
    namespace = cfg.serving.namespace
    refused = pod_security_refusals(cluster, namespace)
    if refused:
        report.add("Pod Security (serving namespace)", "fail", " ".join(refused[0].split())[:400])
        return
    labels = cluster.api().get(f"/api/v1/namespaces/{namespace}")["metadata"].get("labels") or {}
    level = labels.get("pod-security.kubernetes.io/enforce", "privileged")
    pods = made.pods if made else []
    init = sorted({c["name"] for p in pods for c in p["spec"].get("initContainers") or []})
    report.add(
        "Pod Security (serving namespace)",
        "pass",
        f"no refusal; the operator's {len(pods)} pods (init containers: {', '.join(init) or 'none'}) are admitted "
        f"in {namespace} (enforce={level})",
    )


def check_verify_rbac(cfg: StageConfig, cluster: LocalCluster, report: Report) -> None:
    denied = [describe_request(r) for r in verify_requests(cfg) if not access_review(cluster, VERIFY_GROUP, r)]
    allowed = [describe_request(r) for r in forbidden_requests(cfg) if access_review(cluster, VERIFY_GROUP, r)]
    if denied or allowed:
        report.add(
            "verify group RBAC",
            "fail",
            "; ".join([f"denied: {d}" for d in denied] + [f"allowed: {a}" for a in allowed]),
        )
    else:
        report.add(
            "verify group RBAC",
            "pass",
            f"SubjectAccessReviews: the {len(verify_requests(cfg))} requests verify makes are allowed, "
            f"{len(forbidden_requests(cfg))} others (secrets, exec, writes, POST to the dashboard, other "
            f"services and namespaces) denied",
        )


def verify_checks(cfg: StageConfig, cluster: LocalCluster) -> Report:
    """`ops verify`'s Kubernetes checks (nodes, operator, RayService), with the verify group's own token over
    TLS, as the verify runner runs them."""
    report = Report("verify", cfg.stage)
    api, target = cluster.api("verify"), readiness_target(cfg)
    readiness.gpu_nodes(target, api, report)
    readiness.kuberay_operator(target, api, report)
    readiness.ray_service(target, api, report)
    return report


def check_verify(cfg: StageConfig, cluster: LocalCluster, report: Report) -> None:
    result = verify_checks(cfg, cluster)
    for check in result.checks:
        report.add(f"ops verify: {check.name}", check.status, check.detail, check.fix)


def all_checks(
    cfg: StageConfig,
    cluster: LocalCluster,
    applied,
    head: RayHeadStandIn,
    report: Report,
    progress: Callable[[str], None],
) -> None:
    progress("waiting for the KubeRay operator to make the RayService Ready")
    made = operator_verdict(cfg, cluster, report)
    if made is not None:
        check_services(made, report)
        check_serve_config(made, head, report)
    check_pod_security(cfg, cluster, made, report)
    check_stand_in_calls(head, report)
    progress("checking the verify group's rights and ops verify")
    check_verify_rbac(cfg, cluster, report)
    check_verify(cfg, cluster, report)
