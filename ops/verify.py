"""`verify`: after `cdk deploy`, check the running stage end to end through the Kubernetes API.

GPU nodes Ready with their devices, the KubeRay operator available, the RayService ready with its
application RUNNING (waiting up to --wait seconds), NIXL on the stage's transport on every GPU worker
(LIBFABRIC with provider=efa on an EFA stage; UCX or libfabric over TCP with `efa: false`; read through the
Ray dashboard's log API), the OpenAI endpoint answering, and in PD mode the KV cache crossing at the stage's
floor or faster (ops/verify_rate.py: NIXL's own exporter, read through the API server's pod proxy).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import boto3

from charts.readiness import readiness_target
from clients import nixl
from clients.kube import ANSWER_LIMIT, KubeApi, KubeError, MiB, endpoint_problem
from clients.readiness import SHAPE_ERRORS, gpu_nodes, kube_fix, kuberay_operator, ray_service
from clients.report import Report
from config.schema import StageConfig
from config.topology import (
    DASHBOARD_PORT_NAME,
    SERVE_PORT_NAME,
    head_service,
    serve_service,
)

from . import eks_token, telemetry, verify_rate
from .aws_clients import Clients
from .errors import AWS_ERRORS, aws_fix, describe, error_code

DASHBOARD_PORT = DASHBOARD_PORT_NAME
SERVE_PORT = SERVE_PORT_NAME
LOG_LINES = 20000
LOG_LIMIT = 32 * MiB  # one worker log file's last LOG_LINES lines, read through the dashboard
CHAT_PROMPT = "Reply with one short sentence: what is prefill/decode disaggregation?"


@dataclass(frozen=True)
class ClusterAccess:
    endpoint: str
    ca_data: str | None
    private_only: bool


class AccessError(Exception):
    """The cluster cannot be reached; one line that says why and what to do."""


def unreachable(cfg: StageConfig, exc: AccessError) -> Report:
    """verify's report when the cluster cannot be reached: that one failing check, its fix after the `->`."""
    detail, _, fix = str(exc).partition(" -> ")
    report = Report("verify", cfg.stage)
    report.add("cluster access", "fail", detail, fix)
    return report


def cluster_access(cfg: StageConfig, session: boto3.session.Session) -> ClusterAccess:
    where = f"cluster {cfg.cluster_name} in {cfg.region}"
    try:
        answer = session.client("eks", region_name=cfg.region).describe_cluster(name=cfg.cluster_name)
    except AWS_ERRORS as exc:
        missing = error_code(exc) == "ResourceNotFoundException"
        fix = aws_fix(
            exc,
            f"deploy the stage first (scripts/cdk deploy -c stage={cfg.stage} '{cfg.stage}/*'), "
            "or check the stage's region"
            if missing
            else "",
        )
        raise AccessError(f"cannot describe {where}: {describe(exc)}" + (f" -> {fix}" if fix else "")) from None
    cluster = answer.get("cluster") if isinstance(answer, dict) else None
    if not isinstance(cluster, dict):
        raise AccessError(
            f"DescribeCluster answered without a cluster object for {where}: an endpoint that is not "
            f"EKS? (check AWS_ENDPOINT_URL)"
        )
    status = cluster.get("status", "UNKNOWN")
    endpoint = cluster.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise AccessError(
            f"{where} has no API endpoint yet (status {status}): wait until it is ACTIVE "
            f"(aws eks describe-cluster --name {cfg.cluster_name} --region {cfg.region}) and run "
            f"again"
        )
    problem = endpoint_problem(endpoint)
    if problem:
        raise AccessError(
            f"DescribeCluster answered an API endpoint for {where} that verify does not send its token "
            f"to: {problem} (EKS endpoints are https:// with no userinfo, query or fragment: an endpoint "
            f"that is not EKS? check AWS_ENDPOINT_URL)"
        )
    vpc = cluster.get("resourcesVpcConfig") or {}
    ca = cluster.get("certificateAuthority") or {}
    return ClusterAccess(
        endpoint=endpoint,
        ca_data=ca.get("data") if isinstance(ca, dict) else None,
        private_only=isinstance(vpc, dict) and vpc.get("endpointPublicAccess", True) is False,
    )


def connect(
    cfg: StageConfig, session: boto3.session.Session, access: ClusterAccess, *, timeout: float = 30.0
) -> KubeApi:
    """A client for the cluster's API, once GET /version answers (each request within `timeout` s in all)."""
    try:
        token = eks_token.token(session, cfg.cluster_name, cfg.region)
    except AWS_ERRORS as exc:
        fix = aws_fix(exc)
        raise AccessError(f"cannot build an EKS token: {describe(exc)}" + (f" -> {fix}" if fix else "")) from None
    try:
        api = KubeApi(endpoint=access.endpoint, token=token, ca_data=access.ca_data, timeout=timeout)
        api.get("/version")
    except KubeError as exc:
        if exc.kind == "transport" and access.private_only:
            raise AccessError(
                f"{cfg.cluster_name} has a private-only API endpoint and it is not reachable from "
                f"here ({exc}): run verify inside the VPC (verify-remote, a bastion, or an SSM "
                f"session)"
            ) from None
        if exc.kind == "transport":
            raise AccessError(
                f"cannot reach the Kubernetes API of {cfg.cluster_name}: {exc} -> is this machine's "
                f"address in cluster.endpoint.public_access_cidrs? (or run verify-remote)"
            ) from None
        if exc.kind == "endpoint":
            raise AccessError(f"cannot use the API endpoint of {cfg.cluster_name}: {exc}") from None
        if exc.kind == "answer" or (exc.kind == "http" and exc.status is not None and 300 <= exc.status < 400):
            raise AccessError(
                f"{access.endpoint} did not answer as the Kubernetes API of {cfg.cluster_name}: "
                f"{exc} -> {kube_fix(exc)}"
            ) from None
        raise AccessError(
            f"the Kubernetes API of {cfg.cluster_name} refused verify: {exc} -> {kube_fix(exc)}"
        ) from None
    return api


class Progress:
    """One line per poll on a stream (stderr by default): what is still awaited and the time left."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr

    def __call__(self, elapsed: float, budget: float, waiting_for: str) -> None:
        self.stream.write(f"  [{int(elapsed):>4}s/{int(budget)}s] waiting for {waiting_for}\n")
        self.stream.flush()


def run(
    cfg: StageConfig,
    api: KubeApi,
    *,
    wait: float = 0.0,
    poll: float = 10.0,
    progress: Callable[[float, float, str], None] | None = None,
    cloudwatch: Clients | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Report:
    report = Report("verify", cfg.stage)
    progress = progress or Progress()
    start = clock()
    pending = ["GPU nodes", "KubeRay operator", "RayService"]
    target = readiness_target(cfg)
    while True:
        attempt = Report("verify", cfg.stage)
        gpu_nodes(target, api, attempt)
        kuberay_operator(target, api, attempt)
        ray_service(target, api, attempt)
        pending = [c.name for c in attempt.checks if c.status == "fail"]
        elapsed = clock() - start
        if not pending or elapsed + poll > wait:
            break
        progress(elapsed, wait, ", ".join(pending))
        sleep(poll)
    report.checks.extend(attempt.checks)
    if report.ok:
        findings = _nixl(cfg, api, report)
        _openai(cfg, api, report)
        _rate(cfg, api, report, findings)
    else:
        for name in ("NIXL transport", "GET /v1/models", "POST /v1/chat/completions", verify_rate.NAME):
            report.add(name, "skip", "the RayService is not ready")
    if cloudwatch is not None:
        telemetry.check(cfg, cloudwatch, report)
    return report


def _dashboard(cfg: StageConfig, api: KubeApi, path: str, **query) -> Any:
    svc = head_service(cfg.serving.service_name)
    log = path.startswith("/api/v0/logs/")
    return api.request(
        "GET",
        api.service_path(cfg.serving.namespace, svc, DASHBOARD_PORT, path),
        query=query or None,
        raw=log,
        limit=LOG_LIMIT if log else ANSWER_LIMIT,
    )


def _rate(cfg: StageConfig, api: KubeApi, report: Report, findings: dict[str, nixl.NixlFinding] | None) -> None:
    """The fabric gate (ops/verify_rate.py), once the endpoint answers."""
    chat = report.find("POST /v1/chat/completions")
    if cfg.serving.mode == "pd" and (chat is None or chat.status != "pass"):
        report.add(verify_rate.NAME, "skip", "the OpenAI endpoint does not answer a chat completion")
        return
    verify_rate.check(cfg, api, report, findings)


def _nixl(cfg: StageConfig, api: KubeApi, report: Report) -> dict[str, nixl.NixlFinding] | None:
    """The transport check; its findings by worker IP (None when it could not read them)."""
    name = "NIXL transport"
    if cfg.serving.mode != "pd":
        report.add(name, "skip", "colocated mode moves no KV cache between engines")
        return None
    try:
        findings = _nixl_findings(cfg, api)
    except KubeError as exc:
        report.add(
            name,
            "fail",
            f"cannot read the workers' logs through the Ray dashboard: {exc}",
            kube_fix(
                exc,
                "the dashboard's log API is missing: is the head pod running? "
                f"(kubectl -n {cfg.serving.namespace} get pods)",
            ),
        )
        return None
    except SHAPE_ERRORS as exc:
        report.add(
            name,
            "fail",
            "cannot read the workers' logs through the Ray dashboard: unexpected answer "
            f"({'no field ' + str(exc) if isinstance(exc, KeyError) else exc})",
            "the dashboard's State API differs from Ray 2.58's: is serving.ray_version the image's Ray?",
        )
        return None
    if not findings:
        report.add(name, "fail", "no live GPU worker in the Ray cluster")
        return None
    _nixl_verdict(report, name, findings)
    return findings


def _nixl_findings(cfg: StageConfig, api: KubeApi) -> dict[str, nixl.NixlFinding]:
    """Each live GPU worker's NIXL finding from its worker logs, by node IP (none: no live GPU worker)."""
    nodes = _dashboard(cfg, api, "/api/v0/nodes")["data"]["result"]["result"]
    workers = [
        n
        for n in nodes
        if not n.get("is_head_node")
        and n.get("state") == "ALIVE"
        and float(n.get("resources_total", {}).get("GPU", 0)) > 0
    ]
    # EFA on an EFA stage; without EFA, TCP through UCX or libfabric's tcp provider (serving.kv_backend)
    expected = nixl.expected_transport(cfg.gpu_nodegroup.efa, cfg.serving.kv_backend)
    findings = {}
    for node in workers:
        listing = _dashboard(cfg, api, "/api/v0/logs", node_id=node["node_id"], glob="worker-*")
        files = [f for group in listing["data"]["result"].values() for f in group]
        text = "\n".join(
            _dashboard(cfg, api, "/api/v0/logs/file", node_id=node["node_id"], filename=f, lines=LOG_LINES)
            for f in sorted(files)
        )
        findings[node["node_ip"]] = nixl.classify(text, expected)
    return findings


def _nixl_verdict(report: Report, name: str, findings: dict[str, nixl.NixlFinding]) -> None:
    verdicts = {ip: f.verdict for ip, f in findings.items()}
    bad = {ip: f for ip, f in findings.items() if not f.ok}
    if bad:
        first_ip, first = next(iter(bad.items()))
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        report.add(name, "fail", f"worker {first_ip}: {first.detail}{more}", nixl.advice(first), verdicts=verdicts)
    else:
        detail = "; ".join(f"{ip}: {f.detail}" for ip, f in findings.items())
        report.add(name, "pass", detail, verdicts=verdicts)


def _openai(cfg: StageConfig, api: KubeApi, report: Report) -> None:
    serving = cfg.serving
    svc = serve_service(serving.service_name)
    model = serving.model.id
    try:
        models = api.request("GET", api.service_path(serving.namespace, svc, SERVE_PORT, "/v1/models"))
        ids = [m.get("id") for m in models.get("data") or []]
    except KubeError as exc:
        report.add(
            "GET /v1/models",
            "fail",
            str(exc),
            kube_fix(exc, f"the Serve service {svc} is missing: is the RayService ready?"),
        )
        report.add("POST /v1/chat/completions", "skip", "/v1/models failed")
        return
    except SHAPE_ERRORS as exc:
        report.add(
            "GET /v1/models",
            "fail",
            f"unexpected answer ({exc}): not an OpenAI model list",
            "is the Serve application the OpenAI one (serving.mode's builder)?",
        )
        report.add("POST /v1/chat/completions", "skip", "/v1/models failed")
        return
    if model not in ids:
        report.add(
            "GET /v1/models",
            "fail",
            f"{model!r} is not listed (listed: {', '.join(map(str, ids)) or 'none'})",
            "the application may still be loading, or serving.model.id differs from the deployed config",
        )
        report.add("POST /v1/chat/completions", "skip", "the model is not listed")
        return
    report.add("GET /v1/models", "pass", f"lists {model}")
    body = {"model": model, "messages": [{"role": "user", "content": CHAT_PROMPT}], "max_tokens": 32, "temperature": 0}
    started = time.perf_counter()
    try:
        answer = api.request(
            "POST", api.service_path(serving.namespace, svc, SERVE_PORT, "/v1/chat/completions"), body=body, timeout=300
        )
        text = answer["choices"][0]["message"]["content"]
    except KubeError as exc:
        report.add("POST /v1/chat/completions", "fail", str(exc), kube_fix(exc))
        return
    except SHAPE_ERRORS as exc:
        report.add(
            "POST /v1/chat/completions",
            "fail",
            f"unexpected answer ({type(exc).__name__}: {exc}): not an OpenAI chat completion",
        )
        return
    latency = time.perf_counter() - started
    if not text or not str(text).strip():
        report.add("POST /v1/chat/completions", "fail", "empty completion", latency_s=round(latency, 3))
        return
    shown = json.dumps(" ".join(str(text).split())[:80])
    report.add("POST /v1/chat/completions", "pass", f"{latency:.2f} s: {shown}", latency_s=round(latency, 3))
