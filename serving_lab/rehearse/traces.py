"""Each request's time to first token, phase by phase, from vLLM's own request spans (`--ttft-phases`).

With --ttft-phases every engine exports one span per finished request over OTLP/HTTP (protobuf) to the Receiver
below, on loopback (overrides._otlp_traces). The span (vllm@0.26.0 vllm/v1/engine/output_processor.py
OutputProcessor.do_tracing) starts at the request's arrival in the engine's frontend, before templating and
tokenization (wall clock), and ends when the frontend has processed its last output. Its attributes (names:
vllm/tracing/utils.py SpanAttributes) are the engine core's own intervals for that request:

  gen_ai.latency.time_in_queue          queued -> first scheduled
  gen_ai.latency.time_in_model_prefill  first scheduled -> first token
  gen_ai.usage.completion_tokens        1 on PD's prefill leg (Ray's PD server caps it), the answer's length elsewhere
  gen_ai.request.id                     chatcmpl-<the client's X-Request-Id> (vllm/entrypoints/serve/engine/serving.py
                                        OpenAIServing._base_request_id), on both engines of PD: Ray Serve LLM passes
                                        the request's id on (ray/llm/_internal/serve/engines/vllm/vllm_engine.py
                                        _canonicalize_request_id_header)

On PD's decode engine the queue includes the NIXL pull: the scheduler parks a request whose KV cache loads from the
prefill engine in WAITING_FOR_REMOTE_KVS before it records SCHEDULED (vllm/v1/core/sched/scheduler.py
Scheduler.schedule, load_kv_async); its time_in_model_prefill is then its first step on the pulled KV cache."""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from typing import Any

from clients.kube import MiB

from .overrides import OTLP_TRACES_PATH, OTLP_TRACES_PORT

SPAN_NAME = "llm_request"
REQUEST_ID = "gen_ai.request.id"
COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
KEPT = (REQUEST_ID, COMPLETION_TOKENS, PROMPT_TOKENS)
LATENCY = "gen_ai.latency."
ID_PREFIXES = ("chatcmpl-", "cmpl-")  # the OpenAI layer's, before the client's id
PROTOBUF = "application/x-protobuf"  # what the exporter sends (opentelemetry/exporter/otlp/proto/http/__init__.py)
MAX_BODY = 8 * MiB  # one export batch: at most 512 spans (the SDK's BatchSpanProcessor) of about 1 KiB
MAX_SPANS = 100_000  # a rehearsal's rounds send a few hundred requests
MAX_ERRORS = 20


class TraceError(Exception):
    """A body the receiver refuses, or a receiver that cannot start; one line. `status`: the HTTP answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Span:
    """One llm_request span: the request's id (the OpenAI layer's prefix taken off), its wall-clock start and end,
    and the attributes kept (KEPT and every gen_ai.latency.*)."""

    request_id: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, float | int | str]

    def seconds(self, name: str) -> float | None:
        value = self.attributes.get(LATENCY + name)
        return float(value) if isinstance(value, int | float) else None

    def count(self, name: str) -> int | None:
        value = self.attributes.get(name)
        return value if isinstance(value, int) else None

    @property
    def completion_tokens(self) -> int | None:
        return self.count(COMPLETION_TOKENS)

    @property
    def prompt_tokens(self) -> int | None:
        return self.count(PROMPT_TOKENS)


def _protobuf() -> tuple[Any, Any, Any]:
    """(DecodeError, ExportTraceServiceRequest, ExportTraceServiceResponse), imported only when spans are received:
    opentelemetry-proto is the rehearsal host's (serving_lab/pins/serve.lock), not the CLI's."""
    try:
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as service
    except ImportError as exc:
        raise TraceError(
            f"opentelemetry-proto is not installed ({exc}): serving_lab/pins/serve.lock carries it"
        ) from None
    return DecodeError, service.ExportTraceServiceRequest, service.ExportTraceServiceResponse


def decode_spans(body: bytes) -> list[Span]:
    """The llm_request spans of one ExportTraceServiceRequest; TraceError when the body is not one."""
    decode_error, request_type, _ = _protobuf()
    request = request_type()
    try:
        request.ParseFromString(body)
    except decode_error:
        raise TraceError("the body is not an OTLP ExportTraceServiceRequest (protobuf)") from None
    return [
        _span(span)
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
        if span.name == SPAN_NAME
    ]


def _span(span: Any) -> Span:
    attributes = {
        item.key: _value(item.value) for item in span.attributes if item.key in KEPT or item.key.startswith(LATENCY)
    }
    request_id = str(attributes.pop(REQUEST_ID, ""))
    for prefix in ID_PREFIXES:
        request_id = request_id.removeprefix(prefix)
    kept = {key: value for key, value in attributes.items() if value is not None}
    return Span(request_id, span.start_time_unix_nano, span.end_time_unix_nano, kept)


def _value(value: Any) -> float | int | str | None:
    """An OTLP AnyValue's scalar (string, int, double); None for the others."""
    which = value.WhichOneof("value")
    return getattr(value, which) if which in ("string_value", "int_value", "double_value") else None


def read_body(path: str, headers: Mapping[str, str], stream: BufferedIOBase) -> bytes:
    """An export's body: POST /v1/traces, protobuf, uncompressed, of a declared length up to MAX_BODY. `headers`:
    their names in lower case."""
    if path.partition("?")[0] != OTLP_TRACES_PATH:
        raise TraceError(f"{path[:100]}: only {OTLP_TRACES_PATH} is received", 404)
    if headers.get("content-type", "").partition(";")[0].strip() != PROTOBUF:
        raise TraceError(f"Content-Type {headers.get('content-type', '(none)')[:60]!r}: only {PROTOBUF}", 415)
    if headers.get("content-encoding", "identity") != "identity":
        raise TraceError("a compressed body: the engines send theirs uncompressed", 415)
    try:
        length = int(headers.get("content-length", ""))
    except ValueError:
        raise TraceError("no Content-Length", 411) from None
    if not 0 <= length <= MAX_BODY:
        raise TraceError(f"a body of {length} bytes (at most {MAX_BODY})", 413)
    return stream.read(length)


class Receiver:
    """OTLP/HTTP on 127.0.0.1: keeps the llm_request spans of every POST /v1/traces and answers 200 with an empty
    ExportTraceServiceResponse; a body it refuses gets its status and one line, also kept in `errors()`."""

    def __init__(self, port: int = OTLP_TRACES_PORT) -> None:
        self.port = port
        self._spans: list[Span] = []
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None

    def start(self) -> None:
        """Listening in a thread of its own; TraceError without opentelemetry-proto or the port."""
        _protobuf()
        try:
            server = _Server(("127.0.0.1", self.port), _Handler)
        except OSError as exc:
            raise TraceError(f"cannot listen on 127.0.0.1:{self.port}: {exc.strerror}") from None
        server.receiver, server.daemon_threads = self, True
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True).start()
        self._server = server

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    def receive(self, path: str, headers: Mapping[str, str], stream: BufferedIOBase) -> tuple[int, bytes, str]:
        """(status, body, content type) of the answer to one request."""
        try:
            spans = decode_spans(read_body(path, headers, stream))
        except TraceError as exc:
            with self._lock:
                if len(self._errors) < MAX_ERRORS:
                    self._errors.append(f"{exc} (HTTP {exc.status})")
            return exc.status, f"{exc}\n".encode(), "text/plain"
        with self._lock:
            self._spans.extend(spans[: MAX_SPANS - len(self._spans)])
        return 200, _protobuf()[2]().SerializeToString(), PROTOBUF


class _Server(ThreadingHTTPServer):
    receiver: Receiver


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        headers = {name.lower(): value for name, value in self.headers.items()}
        self._answer(*self.server.receiver.receive(self.path, headers, self.rfile))

    def do_GET(self) -> None:
        self._answer(405, f"GET {self.path[:100]}: only POST {OTLP_TRACES_PATH}\n".encode(), "text/plain")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.close_connection = status != 200  # a refused body may be left unread
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: refusals are kept in Receiver.errors, for the report."""


@dataclass(frozen=True)
class Row:
    """One request's time to first token, phase by phase (seconds). PD: the prefill engine's queue and compute, then
    the decode engine's queue (the NIXL pull included) and its first step; colocated: the one engine's queue and
    prefill. `outside_engines_s`: the client's TTFT less those, what Serve's hops, tokenization, the engines'
    frontends and the stream back took. `serve`: Serve's access log for the request (serve_access.figures)."""

    request_id: str
    client_ttft_s: float
    prefill_queue_s: float | None = None
    prefill_compute_s: float | None = None
    decode_queue_s: float | None = None
    decode_first_step_s: float | None = None
    outside_engines_s: float | None = None
    serve: Mapping[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # the spans not received, e.g. ("decode span",)
    prompt_tokens: int | None = None  # as the first engine counted them

    def figures(self) -> dict[str, float]:
        """Every figure the row has, Serve's as serve.<name>."""
        phases = {name: value for name, value in vars(self).items() if name.endswith("_s") and value is not None}
        return phases | {f"serve.{name}": value for name, value in self.serve.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            **({"prompt_tokens": self.prompt_tokens} if self.prompt_tokens is not None else {}),
            **{name: round(value, 5) for name, value in self.figures().items()},
            **({"missing": list(self.missing)} if self.missing else {}),
        }


def rows(
    spans: Iterable[Span], client: Mapping[str, float], *, mode: str, serve: Mapping[str, Mapping[str, float]] = {}
) -> list[Row]:
    """One row per client request (its id -> its TTFT), joined with its spans by id; `serve`: Serve's figures by id."""
    by_id: dict[str, list[Span]] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        by_id.setdefault(span.request_id, []).append(span)
    return [_row(rid, ttft, by_id.get(rid, []), mode, serve.get(rid, {})) for rid, ttft in client.items()]


def _legs(spans: list[Span], mode: str) -> dict[str, Span | None]:
    """PD: the prefill leg generates one token, the decode engine the answer (the first span of one token is the
    prefill's, the other the decode's); colocated: the one engine's span."""
    if mode != "pd":
        return {"engine": spans[0] if spans else None}
    prefill = next((span for span in spans if span.completion_tokens == 1), None)
    return {"prefill": prefill, "decode": next((span for span in spans if span is not prefill), None)}


def _seconds(span: Span | None, name: str) -> float | None:
    return span.seconds(name) if span is not None else None


def _row(request_id: str, ttft: float, spans: list[Span], mode: str, serve: Mapping[str, float]) -> Row:
    legs = _legs(spans, mode)
    first = legs.get("prefill", legs.get("engine"))
    parts = {
        "prefill_queue_s": _seconds(first, "time_in_queue"),
        "prefill_compute_s": _seconds(first, "time_in_model_prefill"),
    }
    if mode == "pd":
        parts["decode_queue_s"] = _seconds(legs["decode"], "time_in_queue")
        parts["decode_first_step_s"] = _seconds(legs["decode"], "time_in_model_prefill")
    known = [value for value in parts.values() if value is not None]
    outside = ttft - sum(known) if len(known) == len(parts) else None
    missing = tuple(f"{name} span" for name, span in legs.items() if span is None)
    tokens = first.prompt_tokens if first is not None else None
    return Row(
        request_id, ttft, **parts, outside_engines_s=outside, serve=dict(serve), missing=missing, prompt_tokens=tokens
    )


def median_figures(found: Iterable[Row]) -> dict[str, float]:
    """Each figure's median over the rows that have it."""
    columns: dict[str, list[float]] = {}
    for row in found:
        for name, value in row.figures().items():
            columns.setdefault(name, []).append(value)
    return {name: round(statistics.median(values), 5) for name, values in columns.items()}


# The phases in the order a PD request meets them, for the console.
ORDER = ("client_ttft_s", "prefill_queue_s", "prefill_compute_s", "decode_queue_s", "decode_first_step_s")


@dataclass(frozen=True)
class PerRequest:
    """A round's requests, phase by phase: the rows, their medians, and what the receiver refused."""

    rows: list[Row]
    spans: int  # llm_request spans the receiver holds (every round's so far)
    errors: list[str] = field(default_factory=list)

    @property
    def complete(self) -> int:
        return sum(1 for row in self.rows if not row.missing)

    @property
    def medians(self) -> dict[str, float]:
        return median_figures(self.rows)

    @property
    def prompt_tokens(self) -> int | None:
        """The median prompt over the rows whose first engine counted it."""
        counted = [row.prompt_tokens for row in self.rows if row.prompt_tokens is not None]
        return int(statistics.median(counted)) if counted else None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": "each request's own llm_request spans (serving_lab/rehearse/traces.py)",
            "complete": self.complete,
            "spans_received": self.spans,
            "medians": self.medians,
            "rows": [row.to_json() for row in self.rows],
            **({"receiver_errors": self.errors} if self.errors else {}),
        }

    def lines(self) -> list[str]:
        middle = self.medians
        shown = ", ".join(
            f"{name[:-2].replace('_', ' ')} {middle[name] * 1000:.1f} ms"
            for name in (*ORDER, "outside_engines_s")
            if name in middle
        )
        out = [f"per request (vLLM's spans): {self.complete} of {len(self.rows)} with every span; medians: {shown}"]
        return out + [f"span receiver: {error}" for error in self.errors]


def per_request(
    receiver: Receiver,
    client: Mapping[str, float],
    *,
    mode: str,
    serve: Callable[[set[str]], Mapping[str, Mapping[str, float]]] | None = None,
) -> PerRequest:
    """The client's requests (id -> TTFT) joined with the spans received so far and, where given, Serve's figures."""
    spans = receiver.spans()
    found = rows(spans, client, mode=mode, serve=serve(set(client)) if serve else {})
    return PerRequest(found, spans=len(spans), errors=receiver.errors())
