"""What `ops verify` checks on EKS, against the rehearsal's endpoint on this host: the model is listed,
a chat completion answers (non-streaming and streaming), and NIXL's log lines say which transport the
KV cache took (clients/nixl.py, the same classifier).

Every request goes through clients/kube.py (`fetch`, and `stream` for the streaming answer): no redirect is
followed (a 3xx fails the check, naming only the host its Location points at) and every body is capped."""

from __future__ import annotations

import json
import time
import urllib.error
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients import kube, nixl, nixl_rate
from clients.report import Report, Status
from serving_lab.bench.results import Run, level_name

if TYPE_CHECKING:
    from . import traces

PROMPT = "In one sentence: what does a prefill/decode split do?"

MiB = kube.MiB
MODELS_LIMIT = 1 * MiB  # GET /v1/models: a list of model cards (one model here)
CHAT_LIMIT = 1 * MiB  # a non-streaming chat completion of 32 tokens
STREAM_LIMIT = 4 * MiB  # a streamed chat completion, all its events: 256 tokens are ~100 KiB of SSE


class HttpFailure(Exception):
    """An answer that is not a success (a redirect included, never followed); one line."""


def _post(url: str, body: dict[str, Any], timeout: float) -> kube.Answer:
    return _success(
        kube.fetch(
            url,
            method="POST",
            data=json.dumps(body).encode(),
            timeout=timeout,
            headers={"Content-Type": "application/json"},
            limit=CHAT_LIMIT,
        ),
        url,
    )


def _success(answer: kube.Answer, url: str) -> kube.Answer:
    """The answer if it is a 2xx; HttpFailure otherwise (a redirect: its status and the Location's host)."""
    if answer.redirect:
        raise HttpFailure(kube.redirected(answer, url))
    if not 200 <= answer.status < 300:
        raise HttpFailure(f"HTTP {answer.status}: {' '.join(answer.body.decode(errors='replace').split())[:300]}")
    return answer


# What a request of these checks can fail with: the transport, the answer (status, size, deadline), its JSON.
# ValueError: an answer kube.parse_json refuses (not JSON, nested too deep, NaN or a number past a float)
FAILURES = (
    urllib.error.URLError,
    OSError,
    ValueError,
    HttpFailure,
    kube.AnswerTooLarge,
    kube.DeadlineExceeded,
)


def _error(exc: BaseException) -> str:
    if isinstance(exc, (HttpFailure, kube.AnswerTooLarge, kube.DeadlineExceeded)):
        return str(exc)
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def sse_events(lines: Iterator[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON chunks of an OpenAI server-sent-event stream, up to `data: [DONE]`."""
    for raw in lines:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        yield kube.parse_json(data)


def stream_chat(
    base: str,
    model: str,
    *,
    max_tokens: int,
    field: str = "max_tokens",
    ignore_eos: bool = False,
    timeout: float = 300,
    prompt: str = PROMPT,
    request_id: str | None = None,
) -> dict[str, Any]:
    """One streaming chat completion: time to first token, tokens (chunks with content), total time. The
    events are read as they arrive (clients.kube.stream): at most STREAM_LIMIT bytes in all and `timeout` seconds
    for the whole answer; a redirect is not followed (HttpFailure). `request_id`: sent as X-Request-Id, the id Serve
    and both engines give the request (serving_lab/rehearse/traces.py)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        field: max_tokens,
        "temperature": 0,
        "stream": True,
    }
    if ignore_eos:
        body["ignore_eos"] = True
    started = time.perf_counter()
    first: float | None = None
    chunks, text = 0, []
    url = f"{base}/v1/chat/completions"
    with kube.stream(
        url,
        method="POST",
        data=json.dumps(body).encode(),
        timeout=timeout,
        headers={"Content-Type": "application/json", **({"X-Request-Id": request_id} if request_id else {})},
        limit=STREAM_LIMIT,
    ) as response:
        if response.redirect:  # refused before any of its body is read
            raise HttpFailure(kube.redirected(response.head(), url))
        if not 200 <= response.status < 300:
            raise HttpFailure(
                f"HTTP {response.status}: {' '.join(response.read().decode(errors='replace').split())[:300]}"
            )
        for event in sse_events(response.lines()):
            for choice in event.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    first = first if first is not None else time.perf_counter() - started
                    chunks += 1
                    text.append(content)
    return {"ttft_s": first, "chunks": chunks, "total_s": time.perf_counter() - started, "text": "".join(text)}


def openai(report: Report, base: str, model: str) -> None:
    try:
        url = f"{base}/v1/models"
        answer = _success(kube.fetch(url, timeout=30, limit=MODELS_LIMIT), url)
        ids = [m.get("id") for m in kube.parse_json(answer.body).get("data", [])]
    except FAILURES as exc:
        report.add("GET /v1/models", "fail", _error(exc))
        return
    if model not in ids:
        report.add("GET /v1/models", "fail", f"{model!r} is not listed (listed: {', '.join(map(str, ids)) or 'none'})")
        return
    report.add("GET /v1/models", "pass", f"lists {model}")
    body = {"model": model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 32, "temperature": 0}
    started = time.perf_counter()
    try:
        answer = kube.parse_json(_post(f"{base}/v1/chat/completions", body, 300).body)
        text = answer["choices"][0]["message"]["content"]
        usage = answer.get("usage") or {}
    except (*FAILURES, KeyError, IndexError, TypeError) as exc:
        report.add("POST /v1/chat/completions", "fail", _error(exc))
    else:
        latency = time.perf_counter() - started
        tokens = usage.get("completion_tokens") or 0
        # Generated tokens are the proof: with dummy weights the text is noise, and may be only
        # whitespace (seen on an H200: 32 tokens of "\n"), which a text check would call a failure.
        status: Status = "pass" if tokens > 0 or (text and str(text).strip()) else "fail"
        report.add(
            "POST /v1/chat/completions",
            status,
            f"{latency:.2f} s, {tokens} tokens: {json.dumps(str(text)[:40])}",
            latency_s=round(latency, 3),
            completion_tokens=tokens,
        )
    try:
        result = stream_chat(base, model, max_tokens=32)
    except FAILURES as exc:
        report.add("POST /v1/chat/completions (stream)", "fail", _error(exc))
        return
    status = "pass" if result["chunks"] > 0 else "fail"
    report.add(
        "POST /v1/chat/completions (stream)",
        status,
        f"first token after {result['ttft_s'] or 0:.3f} s, {result['chunks']} chunks in {result['total_s']:.2f} s",
        ttft_s=result["ttft_s"],
        chunks=result["chunks"],
    )


def token_field_probe(report: Report, base: str, model: str, tokens: int = 256) -> None:
    """PD only: how the answer length is named changes TTFT. Ray's proxy caps the prefill leg with
    `max_tokens = 1` and leaves `max_completion_tokens` alone, which vLLM prefers: with that field the
    prefill engine generates the whole answer before decode starts (why a benchmark sending it stalled)."""
    timings = {}
    for field in ("max_tokens", "max_completion_tokens"):
        try:
            timings[field] = stream_chat(base, model, max_tokens=tokens, field=field, ignore_eos=True)
        except FAILURES as exc:
            report.add(f"PD answer length as {field}", "warn", _error(exc))
            return
    legacy, modern = timings["max_tokens"], timings["max_completion_tokens"]
    ratio = (modern["ttft_s"] or 0) / max(legacy["ttft_s"] or 1e-9, 1e-9)
    report.add(
        "PD answer length field",
        "pass" if legacy["chunks"] else "fail",
        f"{tokens} tokens: TTFT {legacy['ttft_s'] or 0:.3f} s with max_tokens, "
        f"{modern['ttft_s'] or 0:.3f} s with max_completion_tokens ({ratio:.1f}x); the benchmark sends max_tokens",
        max_tokens=legacy,
        max_completion_tokens=modern,
    )


def nixl_transport(report: Report, logs: dict[str, str], *, expect_efa: bool) -> nixl.NixlFinding:
    text = "\n".join(logs.values())
    finding = nixl.classify(text)
    if finding.ok:
        report.add("NIXL transport", "pass", finding.detail, verdict=finding.verdict)
    elif expect_efa:
        report.add("NIXL transport", "fail", finding.detail, verdict=finding.verdict)
    else:
        # No EFA device on this host: "not EFA" is the honest verdict, reported, not hidden.
        status: Status = "warn" if finding.verdict in ("ucx", "tcp") else "fail"
        report.add(
            "NIXL transport",
            status,
            f"not EFA (this host has no EFA device): {finding.detail}",
            verdict=finding.verdict,
        )
    return finding


# The fabric gate of `ops verify` (clients/nixl_rate.py judge), on the rehearsal's own PD run: same requests,
# same verdict; the floor is labelled with where it came from, as a host without EFA has none of its own.
RATE_FIXES = nixl_rate.Fixes(
    none="do the engines use the NixlConnector, and does NIXL's exporter answer on each worker? (docs/REHEARSAL.md)",
    idle="a request's prompt was cached or computed by the decode engine: rehearse again",
    slow="the KV cache crossed over {where}: compare --nixl-backend and --kv-buffer-device runs (docs/REHEARSAL.md)",
)


def kv_transfer_rate(
    report: Report,
    base: str,
    model: str,
    *,
    tokens: int,
    floor: tuple[float, str],
    scrape: Callable[[], dict[str, str]],
    backend: nixl.NixlFinding | None,
    requests: int = 3,
) -> None:
    """`requests` long prompts one at a time, every engine's NIXL exporter scraped around each; `floor`:
    (Gbps, where it comes from)."""
    gbps, source = floor
    run, done = uuid.uuid4().hex[:12], []
    try:
        before = nixl_rate.settled(scrape)
        for index in range(requests):
            text = nixl_rate.gate_prompt(tokens, f"fabric gate {run} request {index + 1}")
            body = {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 8}
            _post(f"{base}/v1/chat/completions", body, timeout=300)
            after = nixl_rate.settled(scrape)
            done.append(nixl_rate.Round({name: nixl_rate.rate(before[name], after[name]) for name in before}))
            before = after
    except nixl_rate.RateError as exc:
        report.add(RATE_CHECK, "fail", f"NIXL's exporter: {exc}", RATE_FIXES.none)
        return
    except FAILURES as exc:
        report.add(RATE_CHECK, "fail", f"a long-prompt request failed: {_error(exc)}")
        return
    status, detail, fix, data = nixl_rate.judge(done, gbps, backend, RATE_FIXES)
    report.add(RATE_CHECK, status, f"{detail}; floor: {source}", fix, **data, floor_source=source)


RATE_CHECK = "KV transfer rate"

NIXL_MARKERS = (
    "NIXL",
    "nixl",
    "Backend ",
    "rails using provider",
    "NixlConnector",
    "NixlPullConnector",
    "kv_role",
    "engine_id",
    "KV Transfer metrics",
    "FI_",
    "libfabric",
)


def nixl_lines(logs: dict[str, str], limit: int = 200) -> list[str]:
    """The NIXL-related log lines, for the committed evidence (bounded)."""
    seen, lines = set(), []
    for name, text in logs.items():
        for line in text.splitlines():
            if any(marker in line for marker in NIXL_MARKERS):
                short = " ".join(line.split())[:400]
                if short not in seen:
                    seen.add(short)
                    lines.append(f"{name}: {short}")
                    if len(lines) >= limit:
                        return lines
    return lines


def engine_memory(report: Report, logs: dict[str, str], *, app: str = "llm") -> list[dict[str, Any]]:
    """vLLM's own memory figures per engine (weights, KV cache memory and tokens, concurrency, CUDA graphs:
    serving_lab/rehearse/engine_memory.py), one report entry each; a warning where an engine's lines are missing."""
    from . import engine_memory as vllm_memory

    found = vllm_memory.engines(logs, app=app)
    if not found:
        report.add(
            "engine memory",
            "warn",
            "no engine replica found in the workers' logs",
            fix="the engines did not start (see worker-errors-<mode>.txt)",
        )
        return []
    for engine in found:
        report.add(
            f"engine memory ({engine.engine})",
            "pass" if engine.complete else "warn",
            engine.summary(),
            fix=""
            if engine.complete
            else "vLLM's start-up lines are missing: the engine did not finish starting (see worker-errors-<mode>.txt)",
            **engine.to_json(),
        )
        report.add(f"engine start-up ({engine.engine})", "pass", engine.startup())
    return [engine.to_json() for engine in found]


def benchmark(report: Report, run: Run, path: Path) -> None:
    """The benchmark's verdict from what it measured: a level that `--budget` left unstarted (the runner's
    settings["skipped"], serving_lab/bench/runner.py) is a warning naming it; a run that measured no level fails,
    since `--bench` asked for figures and none exist."""
    measured = [level_name(profile.name, level) for profile in run.profiles for level in profile.levels] + [
        level_name(profile.name, level) for profile in run.profiles for level in profile.rate_levels
    ]
    skipped = list(run.settings.get("skipped", []))
    fix = "a larger --budget: it counts from the rehearsal's start, the engines' start-up included"
    if not measured:
        why = f"time budget spent before {', '.join(skipped)}" if skipped else "none was selected"
        report.add(
            "benchmark",
            "fail",
            f"no level measured ({why}); results: {path}",
            fix=fix,
            measured=[],
            skipped=skipped,
        )
    elif skipped:
        report.add(
            "benchmark",
            "warn",
            f"{len(measured)} of {len(measured) + len(skipped)} levels measured (time budget spent before "
            f"{', '.join(skipped)}); results: {path}",
            fix=fix,
            measured=measured,
            skipped=skipped,
        )
    else:
        report.add("benchmark", "pass", f"{_levels(len(measured))} measured; results: {path}", measured=measured)


def _levels(count: int) -> str:
    return f"{count} level" if count == 1 else f"{count} levels"


def probe_prompt(index: int, words: int = 120) -> str:
    """A prompt that no other request shares (prefix caching cannot shorten its prefill): about 750 tokens of
    Qwen3.5's (vLLM counted 750: evidence/2026-12-01-h200-tuned)."""
    return f"Request {index}: " + " ".join(f"w{(index * 7919 + j * 104729) % 100003}" for j in range(words))


def ttft_phases(
    report: Report,
    base: str,
    model: str,
    *,
    requests: int = 12,
    concurrency: int = 1,
    max_tokens: int = 16,
    per_request: Callable[[dict[str, float]], traces.PerRequest] | None = None,
):
    """`requests` streams, `concurrency` at a time, each with an id of its own: the client's TTFT of each, joined by
    id with the engines' spans of it (`per_request`: the client's {id: TTFT} -> traces.PerRequest) once they arrived
    (serving_lab/rehearse/phases.py)."""
    from . import phases

    run, client = uuid.uuid4().hex[:12], {}

    def send(index: int) -> float:
        prompt, request_id = probe_prompt(index + 1000 * concurrency), f"ttft-{run}-{index}"
        result = stream_chat(base, model, max_tokens=max_tokens, ignore_eos=True, prompt=prompt, request_id=request_id)
        if result["ttft_s"] is None:
            raise HttpFailure("a probe request streamed no token")
        client[request_id] = result["ttft_s"]
        return result["ttft_s"]

    name = f"TTFT phases, {concurrency} stream{'s' if concurrency > 1 else ''} at a time"
    try:
        found = phases.Round(phases.send_round(send, requests=requests, concurrency=concurrency), concurrency)
    except FAILURES as exc:
        report.add(name, "warn", _error(exc))
        return None
    if per_request is not None:
        found.per_request = phases.settle(lambda: per_request(client))
    medians = found.per_request.medians if found.per_request is not None else {}
    report.add(name, "pass" if found.fully_joined else "warn", "; ".join(found.lines()), medians=medians)
    return found
