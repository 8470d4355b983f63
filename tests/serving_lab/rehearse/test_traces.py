"""serving_lab/rehearse/traces.py: vLLM's request spans received over OTLP/HTTP from the SDK's own exporter, refused
bodies answered in one line, and each request's phases joined across the two engines by its id."""

from __future__ import annotations

import http.client
import io
import json
import socket
import sys

import pytest

from serving_lab.rehearse import traces

from .otlp import VllmSpan, export

T = 1_796_000_000_000_000_000  # a wall-clock instant in 2026, in ns
MS = 1_000_000
# One PD request: the prefill leg (1 token), then the decode engine's, whose queue holds the NIXL pull.
PREFILL = VllmSpan("r1", T, T + 80 * MS, queue=0.002, prefill=0.06, decode=0.0, tokens=1, ttft=0.075)
DECODE = VllmSpan("r1", T + 85 * MS, T + 600 * MS, queue=0.03, prefill=0.012, decode=0.45, tokens=16, ttft=0.05)


@pytest.fixture
def receiver():
    receiver = traces.Receiver(port=0)
    receiver.start()
    yield receiver
    receiver.stop()


def _endpoint(receiver: traces.Receiver) -> str:
    return f"http://127.0.0.1:{receiver.port}/v1/traces"


def _kept(span: VllmSpan) -> dict:
    """What the receiver keeps of a span's attributes: the latencies and the token counts."""
    return {k: v for k, v in span.attributes().items() if k.startswith(("gen_ai.latency.", "gen_ai.usage."))}


def test_the_sdk_exporters_spans_are_received_as_vllm_made_them(receiver):
    export(_endpoint(receiver), [PREFILL, DECODE], other="AsyncMPClient init")
    assert receiver.spans() == [
        traces.Span("r1", T, T + 80 * MS, _kept(PREFILL)),
        traces.Span("r1", T + 85 * MS, T + 600 * MS, _kept(DECODE)),
    ]
    assert receiver.errors() == []


def test_a_pd_request_is_joined_across_both_engines_by_its_id():
    spans = [traces.Span("r1", s.start_ns, s.end_ns, _kept(s)) for s in (DECODE, PREFILL)]
    (row,) = traces.rows(spans, {"r1": 0.18}, mode="pd")
    assert row.to_json() == {
        "request_id": "r1",
        "prompt_tokens": 750,  # as the prefill engine counted it
        "client_ttft_s": 0.18,
        "prefill_queue_s": 0.002,
        "prefill_compute_s": 0.06,
        "decode_queue_s": 0.03,
        "decode_first_step_s": 0.012,
        "outside_engines_s": 0.076,  # 0.18 - 0.002 - 0.06 - 0.03 - 0.012
    }


def test_a_missing_span_leaves_only_its_own_phases_out_and_is_named():
    spans = [traces.Span("r1", PREFILL.start_ns, PREFILL.end_ns, _kept(PREFILL))]
    only_prefill, none = traces.rows(spans, {"r1": 0.18, "r2": 0.2}, mode="pd")
    assert only_prefill.to_json() == {
        "request_id": "r1",
        "prompt_tokens": 750,
        "client_ttft_s": 0.18,
        "prefill_queue_s": 0.002,
        "prefill_compute_s": 0.06,
        "missing": ["decode span"],
    }
    assert none.to_json() == {"request_id": "r2", "client_ttft_s": 0.2, "missing": ["prefill span", "decode span"]}


def test_colocated_takes_the_one_engines_span():
    span = traces.Span("r1", T, T + 600 * MS, _kept(DECODE))
    (row,) = traces.rows([span], {"r1": 0.1}, mode="colocated")
    assert row.to_json() == {
        "request_id": "r1",
        "prompt_tokens": 750,
        "client_ttft_s": 0.1,
        "prefill_queue_s": 0.03,
        "prefill_compute_s": 0.012,
        "outside_engines_s": 0.058,
    }
    (missing,) = traces.rows([], {"r1": 0.1}, mode="colocated")
    assert missing.missing == ("engine span",)


def test_the_medians_skip_what_a_row_lacks_and_keep_serves_figures(receiver):
    export(_endpoint(receiver), [PREFILL, DECODE])
    serve = {"r1": {"ingress_s": 0.6, "prefill_start_s": 0.004}}
    found = traces.per_request(receiver, {"r1": 0.18, "r2": 0.3}, mode="pd", serve=lambda ids: serve)
    assert found.medians == {
        "client_ttft_s": 0.24,
        "prefill_queue_s": 0.002,
        "prefill_compute_s": 0.06,
        "decode_queue_s": 0.03,
        "decode_first_step_s": 0.012,
        "outside_engines_s": 0.076,
        "serve.ingress_s": 0.6,
        "serve.prefill_start_s": 0.004,
    }
    assert (found.complete, found.spans) == (1, 2)
    (line,) = found.lines()
    assert line == (
        "per request (vLLM's spans): 1 of 2 with every span; medians: client ttft 240.0 ms, prefill queue 2.0 ms, "
        "prefill compute 60.0 ms, decode queue 30.0 ms, decode first step 12.0 ms, outside engines 76.0 ms"
    )


def _post(receiver: traces.Receiver, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    connection.putrequest("POST", path)
    for name, value in headers.items():
        connection.putheader(name, value)
    connection.endheaders(body)
    answer = connection.getresponse()
    status, text = answer.status, answer.read()
    connection.close()
    return status, text


PROTOBUF = {"Content-Type": "application/x-protobuf"}
TOO_LARGE = str(traces.MAX_BODY + 1)


@pytest.mark.parametrize(
    ("path", "headers", "body", "status", "line"),
    [
        ("/v1/traces", PROTOBUF, b"not protobuf at all", 400, "the body is not an OTLP ExportTraceServiceRequest (protobuf)"),
        ("/v1/traces", {"Content-Type": "application/json"}, b"{}", 415, "Content-Type 'application/json': only application/x-protobuf"),
        ("/v1/traces", {**PROTOBUF, "Content-Encoding": "gzip"}, b"\x1f\x8b", 415, "a compressed body: the engines send theirs uncompressed"),
        ("/v1/logs", PROTOBUF, b"", 404, "/v1/logs: only /v1/traces is received"),
        ("/v1/traces", {**PROTOBUF, "Content-Length": TOO_LARGE}, b"", 413, f"a body of {TOO_LARGE} bytes (at most {traces.MAX_BODY})"),
    ],
)  # fmt: skip
def test_a_refused_body_gets_one_line_and_the_receiver_goes_on(receiver, path, headers, body, status, line):
    if "Content-Length" not in headers:
        headers = {**headers, "Content-Length": str(len(body))}
    assert _post(receiver, path, headers, body) == (status, f"{line}\n".encode())
    assert receiver.errors() == [f"{line} (HTTP {status})"]
    export(_endpoint(receiver), [PREFILL])
    assert [span.request_id for span in receiver.spans()] == ["r1"]


def test_a_body_without_its_length_is_refused():
    receiver = traces.Receiver(port=0)
    answer = receiver.receive("/v1/traces", {"content-type": "application/x-protobuf"}, io.BytesIO(b"x"))
    assert answer == (411, b"no Content-Length\n", "text/plain")


def test_a_get_is_answered_405_in_one_line(receiver):
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    connection.request("GET", "/v1/traces")
    answer = connection.getresponse()
    assert (answer.status, answer.read()) == (405, b"GET /v1/traces: only POST /v1/traces\n")


def test_a_taken_port_is_one_line():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(traces.TraceError) as refused:
            traces.Receiver(port=port).start()
    assert str(refused.value) == f"cannot listen on 127.0.0.1:{port}: Address already in use"


def test_without_opentelemetry_proto_the_receiver_says_where_it_comes_from(monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.proto.collector.trace.v1", None)
    with pytest.raises(traces.TraceError) as refused:
        traces.Receiver(port=0).start()
    assert str(refused.value).startswith("opentelemetry-proto is not installed (")
    assert str(refused.value).endswith("): serving_lab/pins/serve.lock carries it")
    assert "\n" not in str(refused.value)


def test_the_round_json_holds_the_rows_the_medians_and_the_refusals(receiver):
    _post(receiver, "/v1/x", {**PROTOBUF, "Content-Length": "0"}, b"")
    export(_endpoint(receiver), [PREFILL, DECODE])
    written = json.loads(json.dumps(traces.per_request(receiver, {"r1": 0.18}, mode="pd").to_json()))
    assert written["complete"] == 1 and written["spans_received"] == 2
    assert [row["request_id"] for row in written["rows"]] == ["r1"]
    assert written["medians"]["decode_queue_s"] == 0.03
    assert written["receiver_errors"] == ["/v1/x: only /v1/traces is received (HTTP 404)"]


def _counted(request_id: str, prompt_tokens: int, tokens: int = 1) -> traces.Span:
    span = VllmSpan(request_id, T, T + MS, 0.0, 0.01, 0.0, tokens, 0.01, prompt_tokens=prompt_tokens)
    return traces.Span(request_id, T, T + MS, _kept(span))


def test_a_rows_prompt_is_the_one_the_first_engine_counted():
    # PD's decode engine counts the prompt too; the prefill leg is the one that ran it
    spans = [_counted("r1", 750, tokens=1), _counted("r1", 751, tokens=16)]
    (row,) = traces.rows(spans, {"r1": 0.1}, mode="pd")
    assert row.prompt_tokens == 750


def test_a_rounds_prompt_is_the_median_over_the_rows_that_counted_one():
    spans = [_counted("a", 740), _counted("b", 750), _counted("c", 790)]
    found = traces.PerRequest(traces.rows(spans, {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.1}, mode="colocated"), 3)
    assert found.prompt_tokens == 750
    assert traces.PerRequest(traces.rows([], {"d": 0.1}, mode="colocated"), 0).prompt_tokens is None
