"""vLLM's request spans as vLLM 0.26 exports them, for the tests of the rehearsal's span receiver: the
OpenTelemetry SDK's own OTLP/HTTP exporter (the version serving_lab/pins/serve.lock carries to the rehearsal
host) behind a BatchSpanProcessor, as vllm/tracing/otel.py init_otel_tracer builds it, and each span made as
vllm/v1/engine/output_processor.py OutputProcessor.do_tracing makes it (name, kind, start, attribute names of
vllm/tracing/utils.py SpanAttributes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class VllmSpan:
    """One finished request on one engine: what do_tracing reads, in seconds, and the span's wall-clock bounds."""

    request_id: str  # the client's X-Request-Id; the span carries chatcmpl-<it>
    start_ns: int
    end_ns: int
    queue: float
    prefill: float
    decode: float
    tokens: int
    ttft: float
    prompt_tokens: int = 750

    def attributes(self) -> dict[str, Any]:
        return {
            "gen_ai.latency.time_to_first_token": self.ttft,
            "gen_ai.latency.e2e": (self.end_ns - self.start_ns) / 1e9,
            "gen_ai.latency.time_in_queue": self.queue,
            "gen_ai.usage.prompt_tokens": self.prompt_tokens,
            "gen_ai.usage.completion_tokens": self.tokens,
            "gen_ai.latency.time_in_model_prefill": self.prefill,
            "gen_ai.latency.time_in_model_decode": self.decode,
            "gen_ai.latency.time_in_model_inference": self.prefill + self.decode,
            "gen_ai.request.id": f"chatcmpl-{self.request_id}",
            "gen_ai.request.max_tokens": self.tokens,  # set only when truthy, as do_tracing does
            "gen_ai.request.n": 1,
        }


def export(endpoint: str, spans: list[VllmSpan], *, other: str = "") -> None:
    """`spans` (and one span named `other`, where given) exported to `endpoint` in one batch, as vLLM does."""
    import requests
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import SpanKind

    session = requests.Session()
    session.trust_env = False  # a proxy in the environment must not take loopback
    provider = TracerProvider(resource=Resource.create({"vllm.instrumenting_module_name": "vllm.llm_engine"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, session=session)))
    tracer = provider.get_tracer("vllm.tracing.otel")
    for span in spans:
        made = tracer.start_span(
            "llm_request", kind=SpanKind.SERVER, start_time=span.start_ns, attributes=span.attributes()
        )
        made.end(end_time=span.end_ns)
    if other:
        tracer.start_span(other, start_time=spans[0].start_ns).end(end_time=spans[0].end_ns)
    provider.force_flush()
    provider.shutdown()
