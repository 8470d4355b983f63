"""What the real API server says of the stage once it is applied: Pod Security on the Ray pods, the verify
group's rights (SubjectAccessReviews), `ops verify`'s Kubernetes checks with the verify group's token over
TLS, and whether the KubeRay operator could be built.

The Ray pods here are the RayService's pod templates made into pods as KubeRay's pod builder starts them
(ray-operator/controllers/ray/common/pod.go, DefaultHeadPodTemplate / DefaultWorkerPodTemplate: the
template's spec, KubeRay's labels added). What the operator adds to the container (the `ray start` command,
env, ports, probes, a /dev/shm emptyDir) grants no privilege and is not added: Pod Security judges the
template's securityContext, volumes and host fields, which come from our chart."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from config.schema import StageConfig
from config.topology import (
    DASHBOARD_PORT_NAME,
    KUBERAY_NAMESPACE,
    KUBERAY_RELEASE,
    SERVE_PORT_NAME,
    VERIFY_GROUP,
    head_service,
    serve_service,
)
from ops import verify
from ops.report import Report

from . import tools
from .apply import Applier, ApplyError
from .control_plane import LocalCluster

# KubeRay v1.7.0's labels on every Ray pod (ray-operator/controllers/ray/utils/constant.go; set in
# common/pod.go labelPod): the cluster name is generated (<rayservice>-<5 characters>).
RAY_CLUSTER_NAME = "rehearsal-x7k2p"


def ray_service(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "RayService")


def ray_pods(service: dict[str, Any], namespace: str | None = None) -> list[dict[str, Any]]:
    """One head and one worker pod from the RayService's templates, in `namespace` (the service's own by
    default)."""
    spec = service["spec"]["rayClusterConfig"]
    namespace = namespace or service["metadata"]["namespace"]
    groups = [("head", "headgroup", spec["headGroupSpec"]["template"])]
    groups += [("worker", group["groupName"], group["template"]) for group in spec["workerGroupSpecs"]]
    pods = []
    for node_type, group, template in groups:
        labels = {
            **(template.get("metadata") or {}).get("labels", {}),
            "ray.io/is-ray-node": "yes",
            "ray.io/node-type": node_type,
            "ray.io/group": group,
            "ray.io/cluster": RAY_CLUSTER_NAME,
        }
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{RAY_CLUSTER_NAME}-{node_type}", "namespace": namespace, "labels": labels},
                "spec": copy.deepcopy(template["spec"]),
            }
        )
    return pods


def admitted(applier: Applier, pod: dict[str, Any]) -> str | None:
    """None when the API server admits the pod (a dry run: nothing is stored), else its refusal."""
    try:
        applier.create(pod, dry_run=True)
        return None
    except ApplyError as exc:
        return str(exc)


# What `ops verify` does through the API, as (verb, resource, subresource, namespace, name): each must be
# allowed for the verify group. ops/verify.py makes exactly these requests.
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
    ]


# What the verify group must not do: read secrets, exec into pods, write anything, POST to the dashboard
# (its job API runs code), reach any other service or namespace through the proxy.
def forbidden_requests(cfg: StageConfig) -> list[tuple[str, str, str, str, str]]:
    serving = cfg.serving
    dashboard = f"{head_service(serving.service_name)}:{DASHBOARD_PORT_NAME}"
    return [
        ("get", "secrets", "", serving.namespace, ""),
        ("list", "secrets", "", "", ""),
        ("create", "pods", "exec", serving.namespace, f"{RAY_CLUSTER_NAME}-head"),
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


def check_pod_security(cfg: StageConfig, cluster: LocalCluster, objects: list[dict[str, Any]], report: Report) -> None:
    applier = Applier(cluster.api())
    service = ray_service(objects)
    refused = [problem for pod in ray_pods(service) if (problem := admitted(applier, pod))]
    if refused:
        report.add("Pod Security (serving namespace)", "fail", refused[0])
    else:
        namespace = service["metadata"]["namespace"]
        level = next(o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == namespace)["metadata"][
            "labels"
        ].get("pod-security.kubernetes.io/enforce", "privileged")
        report.add(
            "Pod Security (serving namespace)",
            "pass",
            f"the head and worker pods of the RayService's templates are admitted in {namespace} (enforce={level})",
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
    api = cluster.api("verify")
    verify._gpu_nodes(cfg, api, report)
    verify._operator(api, report)
    verify._ray_service(cfg, api, report)
    return report


def check_verify(cfg: StageConfig, cluster: LocalCluster, report: Report) -> None:
    result = verify_checks(cfg, cluster)
    for check in result.checks:
        report.add(f"ops verify: {check.name}", check.status, check.detail, check.fix)


def check_operator(report: Report, progress: Callable[[str], None]) -> None:
    try:
        tools.ensure(tools.KUBERAY_OPERATOR, progress=progress)
    except tools.ToolError as exc:
        report.add(
            "KubeRay operator",
            "fail",
            f"blocked: {exc}",
            "nothing stands in for the operator: the RayService cannot become Ready here until the proxy "
            "serves this version (no other version is built)",
        )
        return
    report.add(
        "KubeRay operator",
        "fail",
        "built, but running it out of cluster is not wired yet",
        "localcluster/checks.py check_operator",
    )


def all_checks(
    cfg: StageConfig, cluster: LocalCluster, applied, report: Report, progress: Callable[[str], None]
) -> None:
    progress("checking Pod Security, the verify group's rights and ops verify")
    check_pod_security(cfg, cluster, applied.objects, report)
    check_verify_rbac(cfg, cluster, report)
    check_verify(cfg, cluster, report)
    check_operator(report, progress)
