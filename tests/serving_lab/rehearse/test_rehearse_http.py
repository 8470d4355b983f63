"""The HTTP clients of serving_lab/rehearse/ against real local servers on 127.0.0.1, under the rule of clients/kube.py's
`fetch`: no redirect is followed (the server a Location names receives no connection at all, and the caller
reports the redirect in one line naming only that host), and every body is capped. The streaming chat
answer goes through `clients.kube.stream`: the same opener, the same deadline, a total cap."""

from __future__ import annotations

import json
import time

import pytest

from clients import kube
from clients.kube import MiB
from clients.report import Report
from serving_lab.rehearse import checks, cli, ray_cluster
from tests.ops.http_server import Server

REDIRECTS = [301, 302, 303, 307, 308]
MODEL = "qwen3.5-9b"
MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
SECRET = "/steal?token=secret-in-location"


def _json(payload) -> tuple:
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _event(content: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]}).encode() + b"\n\n"


def _sse(tokens: int):
    return 200, {"Content-Type": "text/event-stream"}, [_event(f" w{i}") for i in range(tokens)] + [b"data: [DONE]\n\n"]


def _openai(method: str, path: str) -> tuple:
    """What a redirect's target would answer: the model list, and a streamed chat of 8 chunks."""
    if path == "/v1/models":
        return _json(MODELS)
    if method == "POST":
        return _sse(8)
    return 404, {}, b"not found"


def _redirector(status: int, location: str) -> Server:
    return Server(lambda method, path: (status, {"Location": location, "Content-Length": "0"}, b""))


def _one_line(status: int, port: int) -> str:
    return f"the server answered a redirect (HTTP {status}) to 127.0.0.1:{port}; not followed"


@pytest.fixture
def target():
    """The host a redirect points at: it would answer anything with 200, and counts every connection."""
    with Server(_openai) as server:
        yield server


def _endless():
    """An SSE stream that never ends (no [DONE]), 32 KiB per chunk."""
    event = _event("x" * 100)
    block = event * (32 * 1024 // len(event))
    while True:
        yield block


# --- the Ray dashboard (RayHead.request) ----------------------------------------------------------------


def _head(server: Server, tmp_path) -> ray_cluster.RayHead:
    return ray_cluster.RayHead(num_gpus=0, env={}, temp_dir=tmp_path, dashboard=f"http://127.0.0.1:{server.port}")


@pytest.mark.parametrize("status", REDIRECTS)
def test_the_dashboard_client_follows_no_redirect(status, target, tmp_path):
    with (
        _redirector(status, f"http://127.0.0.1:{target.port}{SECRET}") as redirector,
        pytest.raises(ray_cluster.RayError) as err,
    ):
        _head(redirector, tmp_path).deploy({"applications": []})
    assert target.connections == 0 and target.requests == []
    assert [(m, p) for m, p, _ in redirector.requests] == [("PUT", ray_cluster.APPLICATIONS)]
    assert str(err.value) == f"PUT {ray_cluster.APPLICATIONS}: {_one_line(status, target.port)}"


def test_waiting_for_a_dashboard_that_redirects_ends_in_one_line_and_reaches_no_one(target, tmp_path):
    with (
        _redirector(302, f"http://127.0.0.1:{target.port}{SECRET}") as redirector,
        pytest.raises(ray_cluster.RayError) as err,
    ):
        _head(redirector, tmp_path).wait_for_dashboard(timeout=0, sleep=lambda s: None)
    assert target.connections == 0
    line = str(err.value)
    assert "\n" not in line and "secret" not in line
    assert line == (
        f"the Ray dashboard did not answer within 0 s (GET {ray_cluster.APPLICATIONS}: {_one_line(302, target.port)})"
    )


def test_a_dashboard_answer_over_the_cap_is_refused(tmp_path):
    body = b" " * (ray_cluster.DASHBOARD_LIMIT + 1)
    with (
        Server(lambda method, path: (200, {"Content-Type": "application/json"}, body)) as server,
        pytest.raises(ray_cluster.RayError) as err,
    ):
        _head(server, tmp_path).status()
    assert str(err.value) == f"GET {ray_cluster.APPLICATIONS}: the answer exceeds 8 MiB"


def test_the_dashboard_client_still_reads_an_answer_and_an_http_error(tmp_path):
    details = {"applications": {"llm": {"status": "RUNNING"}}}
    with Server(lambda method, path: _json(details) if method == "GET" else (200, {}, b"")) as server:
        head = _head(server, tmp_path)
        assert head.status() == details
        head.deploy({"applications": []})  # an empty answer is None, no error
    with (
        Server(lambda method, path: (400, {}, b"Traceback...\nValueError: bad config\n")) as server,
        pytest.raises(ray_cluster.RayError) as err,
    ):
        _head(server, tmp_path).deploy({})
    assert str(err.value) == f"PUT {ray_cluster.APPLICATIONS}: HTTP 400: ValueError: bad config"


# --- the OpenAI checks (GET /v1/models, POST /v1/chat/completions) ----------------------------------------


@pytest.mark.parametrize("status", REDIRECTS)
def test_the_models_check_follows_no_redirect(status, target):
    report = Report("rehearse", "dev")
    with _redirector(status, f"http://127.0.0.1:{target.port}{SECRET}") as redirector:
        checks.openai(report, f"http://127.0.0.1:{redirector.port}", MODEL)
    assert target.connections == 0
    (check,) = report.checks
    assert (check.name, check.status) == ("GET /v1/models", "fail")
    assert check.detail == _one_line(status, target.port)


def test_the_chat_checks_follow_no_redirect(target):
    """The models are listed; both chat completions (plain and streamed) answer a 307 to another host."""
    location = f"http://127.0.0.1:{target.port}{SECRET}"
    respond = lambda method, path: (
        _json(MODELS) if path == "/v1/models" else (307, {"Location": location, "Content-Length": "0"}, b"")
    )
    report = Report("rehearse", "dev")
    with Server(respond) as server:
        checks.openai(report, f"http://127.0.0.1:{server.port}", MODEL)
    assert target.connections == 0
    assert [(c.name, c.status, c.detail) for c in report.checks] == [
        ("GET /v1/models", "pass", f"lists {MODEL}"),
        ("POST /v1/chat/completions", "fail", _one_line(307, target.port)),
        ("POST /v1/chat/completions (stream)", "fail", _one_line(307, target.port)),
    ]


def test_a_models_answer_over_the_cap_fails_its_check():
    endless = (b" " * 65536 for _ in range(100_000))
    report = Report("rehearse", "dev")
    with Server(lambda method, path: (200, {"Content-Type": "application/json"}, endless)) as server:
        checks.openai(report, f"http://127.0.0.1:{server.port}", MODEL)
    (check,) = report.checks
    assert (check.status, check.detail) == ("fail", "the answer exceeds 1 MiB")


def test_a_chat_answer_over_the_cap_fails_its_check_and_the_stream_its_own():
    huge = json.dumps({"choices": [{"message": {"content": "x" * checks.CHAT_LIMIT}}]}).encode()
    chats = iter(
        [(200, {"Content-Type": "application/json"}, huge), (200, {"Content-Type": "text/event-stream"}, _endless())]
    )
    respond = lambda method, path: _json(MODELS) if path == "/v1/models" else next(chats)
    report = Report("rehearse", "dev")
    with Server(respond) as server:
        checks.openai(report, f"http://127.0.0.1:{server.port}", MODEL)
    assert [(c.name, c.status, c.detail) for c in report.checks] == [
        ("GET /v1/models", "pass", f"lists {MODEL}"),
        ("POST /v1/chat/completions", "fail", "the answer exceeds 1 MiB"),
        ("POST /v1/chat/completions (stream)", "fail", "the answer exceeds 4 MiB"),
    ]


def test_the_openai_checks_still_pass_against_a_normal_server():
    chats = iter(
        [_json({"choices": [{"message": {"content": "It splits."}}], "usage": {"completion_tokens": 3}}), _sse(32)]
    )
    respond = lambda method, path: _json(MODELS) if path == "/v1/models" else next(chats)
    report = Report("rehearse", "dev")
    with Server(respond) as server:
        checks.openai(report, f"http://127.0.0.1:{server.port}", MODEL)
    assert [(c.name, c.status) for c in report.checks] == [
        ("GET /v1/models", "pass"),
        ("POST /v1/chat/completions", "pass"),
        ("POST /v1/chat/completions (stream)", "pass"),
    ]
    assert report.find("POST /v1/chat/completions").data["completion_tokens"] == 3
    assert report.find("POST /v1/chat/completions (stream)").data["chunks"] == 32


def test_an_http_error_keeps_its_one_line():
    report = Report("rehearse", "dev")
    with Server(lambda method, path: (503, {}, b"<html>\n  upstream\n  unavailable </html>")) as server:
        checks.openai(report, f"http://127.0.0.1:{server.port}", MODEL)
    (check,) = report.checks
    assert check.detail == "HTTP 503: <html> upstream unavailable </html>"


# --- the streaming client (checks.stream_chat over clients.kube.stream) --------------------------------------


def test_stream_chat_reads_a_normal_sse_answer_as_it_arrives():
    def trickled():
        for i in range(5):
            yield _event(f" w{i}")
            time.sleep(0.05)
        yield b"data: [DONE]\n\n"

    with Server(lambda method, path: (200, {"Content-Type": "text/event-stream"}, trickled())) as server:
        result = checks.stream_chat(f"http://127.0.0.1:{server.port}", MODEL, max_tokens=5)
    assert (result["chunks"], result["text"]) == (5, " w0 w1 w2 w3 w4")
    assert result["ttft_s"] < 0.05 and result["total_s"] >= 0.2  # the first event came before the last was sent
    assert [(m, p) for m, p, _ in server.requests] == [("POST", "/v1/chat/completions")]


def test_stream_chat_sends_its_request_id_as_x_request_id():
    # Serve and both engines give the request this id, and vLLM's span carries it (serving_lab/rehearse/traces.py)
    with Server(lambda method, path: _sse(2)) as server:
        checks.stream_chat(f"http://127.0.0.1:{server.port}", MODEL, max_tokens=2, request_id="ttft-abc-0")
        checks.stream_chat(f"http://127.0.0.1:{server.port}", MODEL, max_tokens=2)
    assert [headers.get("x-request-id") for headers in server.headers] == ["ttft-abc-0", None]


@pytest.mark.parametrize("status", REDIRECTS)
def test_stream_chat_refuses_a_redirect_and_the_target_sees_no_connection(status, target):
    with (
        _redirector(status, f"http://127.0.0.1:{target.port}{SECRET}") as redirector,
        pytest.raises(checks.HttpFailure) as err,
    ):
        checks.stream_chat(f"http://127.0.0.1:{redirector.port}", MODEL, max_tokens=8)
    assert target.connections == 0 and target.requests == []
    assert str(err.value) == _one_line(status, target.port)


def test_stream_chat_stops_at_its_cap_on_an_endless_stream():
    with Server(lambda method, path: (200, {"Content-Type": "text/event-stream"}, _endless())) as server:
        started = time.monotonic()
        with pytest.raises(kube.AnswerTooLarge) as err:
            checks.stream_chat(f"http://127.0.0.1:{server.port}", MODEL, max_tokens=8, timeout=60)
    assert str(err.value) == "the answer exceeds 4 MiB" and time.monotonic() - started < 30


def test_stream_chat_stops_at_its_deadline_on_a_stream_that_trickles_forever():
    """An event every 0.1 s, never [DONE], never over the cap: the overall deadline ends it, not a socket
    timeout that restarts at every byte."""

    def trickle():
        while True:
            yield _event("x")
            time.sleep(0.1)

    with Server(lambda method, path: (200, {"Content-Type": "text/event-stream"}, trickle())) as server:
        started = time.monotonic()
        with pytest.raises(kube.DeadlineExceeded) as err:
            checks.stream_chat(f"http://127.0.0.1:{server.port}", MODEL, max_tokens=8, timeout=1)
        elapsed = time.monotonic() - started
    assert 1 <= elapsed < 5
    assert str(err.value).startswith("no complete answer within 1 s")


# --- clients.kube.stream itself --------------------------------------------------------------------------------


@pytest.mark.parametrize("status", REDIRECTS)
def test_kube_stream_yields_a_redirect_as_it_came_and_follows_none(status, target):
    location = f"http://127.0.0.1:{target.port}/v1/models"
    with (
        _redirector(status, location) as redirector,
        kube.stream(f"http://127.0.0.1:{redirector.port}/v1/models") as answer,
    ):
        assert (answer.status, answer.redirect, answer.location) == (status, True, location)
        assert kube.redirected(answer.head(), "http://x/") == _one_line(status, target.port)
        assert answer.read() == b""
    assert target.connections == 0


def test_kube_stream_refuses_a_declared_length_over_the_cap_before_reading():
    declared = {"Content-Type": "text/event-stream", "Content-Length": str(1024 * MiB)}
    with Server(lambda method, path: (200, declared, b"data: {}\n\n")) as server:
        started = time.monotonic()
        with (
            pytest.raises(kube.AnswerTooLarge) as err,
            kube.stream(f"http://127.0.0.1:{server.port}/", timeout=10, limit=MiB),
        ):
            pytest.fail("the body was about to be read")
    assert str(err.value) == "the answer exceeds 1 MiB" and time.monotonic() - started < 10


def test_kube_stream_reads_lines_up_to_exactly_the_cap():
    body = b"a\n" * 512  # 1 KiB
    with Server(lambda method, path: (200, {}, [body[:300], body[300:]])) as server:
        with kube.stream(f"http://127.0.0.1:{server.port}/", limit=1024) as answer:
            assert list(answer.lines()) == [b"a\n"] * 512 and answer.size == 1024
        with kube.stream(f"http://127.0.0.1:{server.port}/", limit=1023) as answer, pytest.raises(kube.AnswerTooLarge):
            list(answer.lines())


def test_kube_stream_answers_an_unreachable_host_with_the_transport_error():
    with pytest.raises(OSError), kube.stream("http://127.0.0.1:9/", timeout=5):
        pass


# --- the metrics scrape (cli._scrape_metrics) --------------------------------------------------------------


def _scrape(server: Server, tmp_path, monkeypatch) -> tuple[list[str], object]:
    monkeypatch.setattr(cli, "METRICS_PORT", server.port)
    said: list[str] = []
    path = tmp_path / "metrics.txt"
    cli._scrape_metrics(path, said.append)
    return said, path


@pytest.mark.parametrize("status", REDIRECTS)
def test_the_metrics_scrape_follows_no_redirect(status, target, tmp_path, monkeypatch):
    with _redirector(status, f"http://127.0.0.1:{target.port}{SECRET}") as redirector:
        said, path = _scrape(redirector, tmp_path, monkeypatch)
    assert target.connections == 0
    assert said == [f"metrics: not scraped ({_one_line(status, target.port)})"] and not path.exists()


def test_metrics_over_the_cap_are_not_scraped(tmp_path, monkeypatch):
    line = b"# TYPE ray_padding_total counter\n"
    endless = (line * 2048 for _ in range(100_000))
    with Server(lambda method, path: (200, {"Content-Type": "text/plain"}, endless)) as server:
        said, path = _scrape(server, tmp_path, monkeypatch)
    assert said == ["metrics: not scraped (the answer exceeds 32 MiB)"] and not path.exists()


def test_metrics_are_still_scraped_and_an_http_error_is_one_line(tmp_path, monkeypatch):
    text = b"# HELP ray_a a\n# TYPE ray_a gauge\nray_a 1\n# TYPE vllm:ttft histogram\nvllm:ttft_bucket 1\n"
    with Server(lambda method, path: (200, {"Content-Type": "text/plain"}, text)) as server:
        said, path = _scrape(server, tmp_path, monkeypatch)
    assert path.read_text() == "ray_a\nvllm:ttft\n"
    assert said == [f"metrics: 2 series names from :{server.port}/metrics -> {path}"]
    with Server(lambda method, path: (404, {}, b"no")) as server:
        said, _ = _scrape(server, tmp_path, monkeypatch)
    assert said == ["metrics: not scraped (HTTP Error 404: Not Found)"]
