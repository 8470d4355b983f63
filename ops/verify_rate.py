"""`ops verify`'s KV transfer rate (the fabric gate): a few sequential requests of the stage's long-prompt size
through the PD endpoint, NIXL's own exporter on every GPU worker scraped before and after each through the API
server's pod proxy, and a verdict in one line against the stage's floor (config/derived.py
kv_transfer_floor_gbps). The numbers come from clients/nixl_rate.py; the backend and provider from the
transport check's log findings (clients/nixl.py). docs/OPERATIONS.md, "The fabric gate", says what to do on
each verdict."""

from __future__ import annotations

import statistics
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from clients import nixl
from clients.kube import KubeApi, KubeError
from clients.nixl_rate import Rate, RateError, rate
from clients.readiness import SHAPE_ERRORS, kube_fix
from clients.report import Report, Status
from config.derived import kv_transfer_floor_gbps
from config.schema import StageConfig
from config.topology import NIXL_METRICS_PORT, SERVE_PORT_NAME, serve_service

NAME = "KV transfer rate"
WORKER_SELECTOR = "ray.io/node-type=worker"
REQUESTS = 3
GUIDE = "docs/OPERATIONS.md, 'The fabric gate'"
# A common English word is one token in the tokenizers of the served models (Qwen's BPE among them): the prompt
# is about as many tokens as words, and a few under the profile's size so that it fits max_model_len.
_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "cold",
    "rain",
    "falls",
    "on",
    "old",
    "stone",
    "walls",
]
_MARGIN = 32


class GateError(Exception):
    """One verdict line and what to do, for a check that cannot give a rate."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail, self.fix = detail, fix


@dataclass(frozen=True)
class Round:
    """One request: what each worker's agent received meanwhile, by pod name."""

    rates: Mapping[str, Rate]


def long_prompt_tokens(cfg: StageConfig) -> int:
    """The stage's long-prompt benchmark size: the profile named long-prompt, else the longest prompt."""
    profiles = cfg.benchmark.profiles
    named = [p for p in profiles if p.name == "long-prompt"]
    return (named[0] if named else max(profiles, key=lambda p: p.input_tokens)).input_tokens


def prompt(tokens: int, nonce: str) -> str:
    """About `tokens` tokens, opening with `nonce` so that no engine finds any of it in its prefix cache (a
    cached prefix would not cross NIXL)."""
    count = max(1, tokens - _MARGIN)
    return f"{nonce}: " + " ".join(_WORDS[i % len(_WORDS)] for i in range(count))


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
    done = []
    for index in range(count):
        before = scrape(cfg, api, pods)
        complete(cfg, api, prompt(tokens, f"fabric gate {run} request {index + 1}"))
        after = scrape(cfg, api, pods)
        try:
            done.append(Round({pod: rate(before[pod], after[pod]) for pod in pods}))
        except RateError as exc:
            raise GateError(f"NIXL's exporter: {exc}", f"run verify again; if it persists, see {GUIDE}") from None
    return done


def _decode_pod(done: list[Round]) -> str | None:
    """The worker whose agent received the KV cache (in PD the decode engine reads it): the most bytes."""
    moved: dict[str, int] = {}
    for one in done:
        for pod, found in one.rates.items():
            moved[pod] = moved.get(pod, 0) + found.bytes
    most = max(moved, key=lambda name: moved[name], default=None)
    return most if most is not None and moved[most] > 0 else None


def _summary(pod: str, rates: list[Rate], floor: float, backend: nixl.NixlFinding | None) -> dict[str, object]:
    gbps = sorted(found.gbps or 0.0 for found in rates)
    return {
        "pod": pod,
        "bytes": sum(found.bytes for found in rates),
        "transfers": sum(found.transfers for found in rates),
        "median_gbps": round(statistics.median(gbps), 3),
        "worst_gbps": round(gbps[0], 3),
        "floor_gbps": floor,
        "backend": backend.detail if backend else "not read (the transport check found no logs for this worker)",
    }


def judge(
    done: list[Round], floor: float, backend: nixl.NixlFinding | None
) -> tuple[Status, str, str, dict[str, object]]:
    """(status, detail, fix, data) of the gate over the rounds: no transfer, wrong backend, slow, or a pass."""
    pod = _decode_pod(done)
    if pod is None:
        detail = f"{len(done)} long-prompt requests moved no KV bytes over NIXL (no worker's agent_rx_bytes_total rose)"
        return (
            "fail",
            detail,
            f"is the endpoint the PD application, and do the engines use the NixlConnector? ({GUIDE})",
            {},
        )
    rates = [one.rates[pod] for one in done]
    idle = sum(1 for found in rates if not found.moved or found.gbps is None)
    if idle:
        fix = f"a request's prompt was cached or computed by the decode engine: run verify again ({GUIDE})"
        return "fail", f"{idle} of {len(done)} long-prompt requests moved no KV bytes to {pod}", fix, {"pod": pod}
    data = _summary(pod, rates, floor, backend)
    summary = (
        f"{pod}: {data['bytes']:,} bytes in {len(done)} requests, per transfer median {data['median_gbps']:g} Gbps, "
        f"worst {data['worst_gbps']:g} (floor {floor:g})"
    )
    if backend is not None and not backend.ok:
        return "fail", f"wrong backend: {summary}, over {backend.detail}", nixl.advice(backend) or GUIDE, data
    if statistics.median(found.gbps or 0.0 for found in rates) < floor:
        where = backend.detail if backend else "the provider"
        fix = f"check the EFA path ({where}), the pods' vpc.amazonaws.com/efa and the nodes' placement ({GUIDE})"
        return "fail", f"slow transfer: {summary}", fix, data
    return "pass", f"{summary}; {data['backend']}", "", data


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
    pod = _decode_pod(done)
    backend = (findings or {}).get(pods[pod]) if pod else None
    status, detail, fix, data = judge(done, floor, backend)
    report.add(NAME, status, detail, fix, **data)
