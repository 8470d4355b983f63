"""`ops verify`'s KV transfer rate (the fabric gate): a few sequential requests of the stage's long-prompt size
through the PD endpoint, NIXL's own exporter on every GPU worker scraped before and after each through the API
server's pod proxy, and a verdict in one line against the stage's floor (config/derived.py
kv_transfer_floor_gbps). The numbers come from clients/nixl_rate.py; the backend and provider from the
transport check's log findings (clients/nixl.py). docs/OPERATIONS.md, "The fabric gate", says what to do on
each verdict."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from clients import nixl
from clients.kube import KubeApi, KubeError
from clients.nixl_rate import Fixes, RateError, Round, gate_prompt, judge, rate, receiver, settled
from clients.readiness import SHAPE_ERRORS, kube_fix
from clients.report import Report
from config.derived import kv_transfer_floor_gbps, long_prompt_tokens
from config.schema import StageConfig
from config.topology import NIXL_METRICS_PORT, SERVE_PORT_NAME, serve_service

NAME = "KV transfer rate"
WORKER_SELECTOR = "ray.io/node-type=worker"
REQUESTS = 3
GUIDE = "docs/OPERATIONS.md, 'The fabric gate'"


class GateError(Exception):
    """One verdict line and what to do, for a check that cannot give a rate."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail, self.fix = detail, fix


def worker_pods(cfg: StageConfig, api: KubeApi) -> dict[str, str]:
    """The serving namespace's running Ray GPU workers, name -> pod IP: KubeRay labels them
    ray.io/node-type=worker (ray-operator/controllers/ray/common/pod.go, RayNodeTypeLabelKey), and the namespace
    holds only the stage's Ray pods."""
    answer = api.get(f"/api/v1/namespaces/{cfg.serving.namespace}/pods", labelSelector=WORKER_SELECTOR)
    return {
        pod["metadata"]["name"]: pod["status"]["podIP"]
        for pod in answer["items"]
        if pod.get("status", {}).get("phase") == "Running"
    }


def exporter_path(namespace: str, pod: str) -> str:
    """The API server's pod proxy to NIXL's exporter: a port number (the proxy joins it to the pod's IP as it
    is: kubernetes pkg/registry/core/pod/strategy.go ResourceLocation), the path NIXL serves (/metrics)."""
    return f"/api/v1/namespaces/{namespace}/pods/{pod}:{NIXL_METRICS_PORT}/proxy/metrics"


def scrape(cfg: StageConfig, api: KubeApi, pods: Mapping[str, str]) -> dict[str, str]:
    answers = {}
    for pod in pods:
        try:
            answers[pod] = api.request("GET", exporter_path(cfg.serving.namespace, pod), raw=True)
        except KubeError as exc:
            raise GateError(
                f"NIXL's exporter on {pod} (port {NIXL_METRICS_PORT}) did not answer: {exc}",
                f"do the worker pods run the stage's template (NIXL_TELEMETRY_* env, port nixl-metrics)? "
                f"deploy the serving stack; then kubectl -n {cfg.serving.namespace} logs {pod} | grep -i telemetry "
                f"({GUIDE})",
            ) from None
    return answers


def complete(cfg: StageConfig, api: KubeApi, text: str) -> None:
    """One chat completion through the Serve service's proxy, as verify's own (ops/verify.py _openai)."""
    serving = cfg.serving
    path = api.service_path(
        serving.namespace, serve_service(serving.service_name), SERVE_PORT_NAME, "/v1/chat/completions"
    )
    body = {"model": serving.model.id, "messages": [{"role": "user", "content": text}], "max_tokens": 8}
    try:
        api.request("POST", path, body=body, timeout=300)
    except KubeError as exc:
        raise GateError(f"a long-prompt request through the PD endpoint failed: {exc}", kube_fix(exc)) from None


def rounds(cfg: StageConfig, api: KubeApi, pods: Mapping[str, str], count: int) -> list[Round]:
    """`count` sequential requests, each between two scrapes of every worker's exporter."""
    tokens, run = long_prompt_tokens(cfg), uuid.uuid4().hex[:12]
    done: list[Round] = []
    before = settled(lambda: scrape(cfg, api, pods))
    for index in range(count):
        complete(cfg, api, gate_prompt(tokens, f"fabric gate {run} request {index + 1}"))
        after = settled(lambda: scrape(cfg, api, pods))
        try:
            done.append(Round({pod: rate(before[pod], after[pod]) for pod in pods}))
        except RateError as exc:
            raise GateError(f"NIXL's exporter: {exc}", f"run verify again; if it persists, see {GUIDE}") from None
        before = after
    return done


FIXES = Fixes(
    none=f"is the endpoint the PD application, and do the engines use the NixlConnector? ({GUIDE})",
    idle=f"a request's prompt was cached or computed by the decode engine: run verify again ({GUIDE})",
    slow="check the EFA path ({where}), the pods' vpc.amazonaws.com/efa and the nodes' placement (" + GUIDE + ")",
)


def check(
    cfg: StageConfig,
    api: KubeApi,
    report: Report,
    findings: Mapping[str, nixl.NixlFinding] | None = None,
    *,
    requests: int = REQUESTS,
) -> None:
    """The gate's check on `report`; `findings`: the transport check's, by worker IP (ops/verify.py)."""
    floor = kv_transfer_floor_gbps(cfg)
    if floor is None:
        report.add(NAME, "skip", "colocated mode moves no KV cache between engines")
        return
    try:
        pods = worker_pods(cfg, api)
        if not pods:
            raise GateError("no running GPU worker pod in the serving namespace", "is the RayService ready?")
        done = rounds(cfg, api, pods, requests)
    except GateError as exc:
        report.add(NAME, "fail", exc.detail, exc.fix)
        return
    except KubeError as exc:
        report.add(NAME, "fail", f"cannot list the GPU worker pods: {exc}", kube_fix(exc))
        return
    except SHAPE_ERRORS as exc:
        report.add(NAME, "fail", f"unexpected pod list ({exc}): not what a Kubernetes API server sends")
        return
    pod = receiver(done)
    backend = (findings or {}).get(pods[pod]) if pod else None
    status, detail, fix, data = judge(done, floor, backend, FIXES)
    report.add(NAME, status, detail, fix, **data)
