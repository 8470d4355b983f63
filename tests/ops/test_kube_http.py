"""The HTTP clients of ops/ against real local servers on 127.0.0.1: no redirect is followed (the server a
Location names receives no connection at all), a bearer token goes only to an https:// endpoint without
userinfo, query or fragment (anything else is refused before a connection), and every body is capped."""

from __future__ import annotations

import json
import ssl
import time

import boto3
import pytest
from botocore.stub import Stubber

from clients.kube import ANSWER_LIMIT, AnswerTooLarge, KubeApi, KubeError, MiB, fetch
from ops import verify
from ops.__main__ import main
from serving_lab.bench.aiperf import BenchError
from serving_lab.bench.endpoint import check_models

from .fake_cluster import FIXTURES, HEAD, SERVE, TOKEN, FakeCluster, Scenario, tls
from .http_server import Server

REDIRECTS = [301, 302, 303, 307, 308]
MODELS = {"object": "list", "data": [{"id": "qwen3.5-9b", "object": "model"}]}


def _json(payload) -> tuple:
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _api(server: Server, **kwargs) -> KubeApi:
    return KubeApi(server.endpoint, TOKEN, ca_data=tls().ca_data, **kwargs)


@pytest.fixture
def target():
    """The host a redirect points at: it would answer 200 to anyone (TLS with the same trusted CA), and
    counts every connection."""
    with Server(lambda method, path: _json({"major": "1", "minor": "35"}), https=True) as server:
        yield server


@pytest.fixture
def plain_target():
    with Server(lambda method, path: _json(MODELS), https=False) as server:
        yield server


def _redirector(status: int, location: str, *, https: bool = True) -> Server:
    return Server(lambda method, path: (status, {"Location": location, "Content-Length": "0"}, b""), https=https)


# --- no redirect is followed ------------------------------------------------------------------------


@pytest.mark.parametrize("status", REDIRECTS)
@pytest.mark.parametrize("scheme", ["https", "http"])
def test_kube_api_follows_no_redirect_and_the_target_sees_no_connection(status, scheme, target, plain_target):
    host = target if scheme == "https" else plain_target
    port = host.server_address[1]
    with (
        _redirector(status, f"{scheme}://127.0.0.1:{port}/steal?token=secret-in-location") as redirector,
        pytest.raises(KubeError) as err,
    ):
        _api(redirector).request(
            "POST" if status in (307, 308) else "GET", "/version", body={"x": 1} if status in (307, 308) else None
        )
    assert host.connections == 0 and host.requests == []
    assert [auth for _, _, auth in redirector.requests] == [f"Bearer {TOKEN}"]
    method = "POST" if status in (307, 308) else "GET"
    assert str(err.value) == (
        f"{method} /version: the server answered a redirect (HTTP {status}) to 127.0.0.1:{port}; not followed"
    )
    assert (err.value.kind, err.value.status) == ("http", status)


def test_a_relative_redirect_names_the_same_host_and_is_not_followed():
    with _redirector(302, "/elsewhere") as redirector, pytest.raises(KubeError) as err:
        _api(redirector).get("/version")
    assert len(redirector.requests) == 1
    port = redirector.server_address[1]
    assert (
        str(err.value) == f"GET /version: the server answered a redirect (HTTP 302) to 127.0.0.1:{port}; not followed"
    )


def test_a_redirect_without_location_is_a_failed_request():
    with (
        Server(lambda method, path: (300, {"Content-Length": "0"}, b""), https=True) as server,
        pytest.raises(KubeError) as err,
    ):
        _api(server).get("/version")
    assert str(err.value) == "GET /version: the server answered a redirect (HTTP 300) without a Location; not followed"


def test_a_redirect_behind_the_service_proxy_fails_its_check_and_reaches_no_one(dev, target):
    port = target.server_address[1]
    scenario = Scenario(
        raw={f"{SERVE}/v1/models": (302, "text/plain", b"", {"Location": f"https://127.0.0.1:{port}/v1/models"})}
    )
    with FakeCluster(scenario) as fake:
        report = verify.run(dev, fake.api(), progress=lambda *a: None)
    check = report.find("GET /v1/models")
    assert target.connections == 0
    assert check.status == "fail"
    assert check.detail == (
        f"GET {SERVE}/v1/models: the server answered a redirect (HTTP 302) to 127.0.0.1:{port}; not followed"
    )
    assert check.fix.startswith("verify follows no redirect (it would carry the token to another host)")


def test_connect_to_an_api_server_that_redirects_is_one_line_and_reaches_no_one(dev, target, monkeypatch):
    monkeypatch.setattr(verify.eks_token, "token", lambda *a: TOKEN)
    port = target.server_address[1]
    with _redirector(307, f"https://127.0.0.1:{port}/version") as redirector:
        access = verify.ClusterAccess(endpoint=redirector.endpoint, ca_data=tls().ca_data, private_only=False)
        with pytest.raises(verify.AccessError) as err:
            verify.connect(dev, None, access)
    assert target.connections == 0
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(
        f"{redirector.endpoint} did not answer as the Kubernetes API of pd-inference-dev: GET "
        f"/version: the server answered a redirect (HTTP 307) to 127.0.0.1:{port}; not followed -> "
        f"verify follows no redirect"
    )


@pytest.mark.parametrize("status", REDIRECTS)
def test_fetch_without_a_token_returns_the_redirect_and_follows_none(status, plain_target):
    port = plain_target.server_address[1]
    with _redirector(status, f"http://127.0.0.1:{port}/v1/models", https=False) as redirector:
        answer = fetch(redirector.endpoint + "/v1/models")
    assert plain_target.connections == 0
    assert (answer.status, answer.location) == (status, f"http://127.0.0.1:{port}/v1/models")


@pytest.mark.parametrize("status", REDIRECTS)
def test_bench_endpoint_check_follows_no_redirect(status, plain_target):
    port = plain_target.server_address[1]
    with (
        _redirector(status, f"http://127.0.0.1:{port}/v1/models", https=False) as redirector,
        pytest.raises(BenchError) as err,
    ):
        check_models(redirector.endpoint, "qwen3.5-9b")
    assert plain_target.connections == 0
    assert str(err.value) == (
        f"endpoint {redirector.endpoint}: GET /v1/models: the server answered a redirect "
        f"(HTTP {status}) to 127.0.0.1:{port}; not followed (pass --url with the Serve endpoint "
        f"itself, port 8000)"
    )


# --- the token goes only to https:// ------------------------------------------------------------------


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("http://127.0.0.1:{port}", "it is not https:// (scheme 'http')"),
        ("HTTP://127.0.0.1:{port}", "it is not https:// (scheme 'http')"),
        ("https://admin:hunter2@127.0.0.1:{port}", "it carries userinfo (user@ before the host)"),
        ("https://127.0.0.1:{port}?x=1", "it has a query (?...)"),
        ("https://127.0.0.1:{port}/?", "it has a query (?...)"),
        ("https://127.0.0.1:{port}#frag", "it has a fragment (#...)"),
        ("https://:{port}", "it names no host"),
        ("https://127.0.0.1:{port}\r\nX: y", "it contains spaces or control characters"),
    ],
)
@pytest.mark.parametrize("https", [True, False])
def test_an_endpoint_the_token_must_not_go_to_is_refused_before_any_connection(endpoint, problem, https):
    with Server(lambda method, path: _json({"major": "1"}), https=https) as server:
        api = KubeApi(endpoint.format(port=server.server_address[1]), TOKEN, ca_data=tls().ca_data)
        with pytest.raises(KubeError) as err:
            api.get("/version")
        time.sleep(0.05)  # a connection attempt, had one been made, is accepted by now
    assert server.connections == 0 and server.requests == []
    assert err.value.kind == "endpoint"
    assert str(err.value) == (
        f"GET /version: the cluster endpoint is refused, {problem}: the token is sent only to an "
        f"https:// URL with no userinfo, query or fragment"
    )
    assert "hunter2" not in str(err.value)


def test_connect_refuses_an_http_endpoint_in_one_line_and_connects_nowhere(dev, plain_target, monkeypatch):
    monkeypatch.setattr(verify.eks_token, "token", lambda *a: TOKEN)
    access = verify.ClusterAccess(endpoint=plain_target.endpoint, ca_data=None, private_only=False)
    with pytest.raises(verify.AccessError) as err:
        verify.connect(dev, None, access)
    assert plain_target.connections == 0
    assert str(err.value) == (
        "cannot use the API endpoint of pd-inference-dev: GET /version: the cluster endpoint is "
        "refused, it is not https:// (scheme 'http'): the token is sent only to an https:// URL "
        "with no userinfo, query or fragment"
    )


def _stubbed_eks(monkeypatch, endpoint: str) -> boto3.session.Session:
    session = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-west-2"
    )
    eks = session.client("eks", region_name="us-west-2")
    stub = Stubber(eks)
    stub.add_response(
        "describe_cluster",
        {"cluster": {"name": "pd-inference-dev", "status": "ACTIVE", "endpoint": endpoint}},
        {"name": "pd-inference-dev"},
    )
    stub.activate()
    real = session.client
    monkeypatch.setattr(session, "client", lambda name, **kw: eks if name == "eks" else real(name, **kw))
    return session


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("http://ABC.gr7.us-west-2.eks.amazonaws.com", "it is not https:// (scheme 'http')"),
        ("https://user:pw@ABC.gr7.us-west-2.eks.amazonaws.com", "it carries userinfo (user@ before the host)"),
        ("https://ABC.gr7.us-west-2.eks.amazonaws.com?redirect=1", "it has a query (?...)"),
        ("https://ABC.gr7.us-west-2.eks.amazonaws.com#x", "it has a fragment (#...)"),
    ],
)
def test_cluster_access_refuses_an_endpoint_that_is_not_plain_https(endpoint, problem, dev, monkeypatch):
    session = _stubbed_eks(monkeypatch, endpoint)
    with pytest.raises(verify.AccessError) as err:
        verify.cluster_access(dev, session)
    assert str(err.value) == (
        "DescribeCluster answered an API endpoint for cluster pd-inference-dev in us-west-2 that "
        f"verify does not send its token to: {problem} (EKS endpoints are https:// with no "
        "userinfo, query or fragment: an endpoint that is not EKS? check AWS_ENDPOINT_URL)"
    )


def test_verify_cli_with_an_http_endpoint_exits_1_with_one_line(monkeypatch, capsys):
    session = _stubbed_eks(monkeypatch, "http://ABC.gr7.us-west-2.eks.amazonaws.com")
    assert main(["verify", "--stage", "dev"], session=session) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.startswith(
        "verify --stage dev: DescribeCluster answered an API endpoint for cluster pd-inference-dev "
        "in us-west-2 that verify does not send its token to: it is not https://"
    )


# --- every body is capped -----------------------------------------------------------------------------


def test_a_normal_json_answer_over_https_still_works():
    with Server(lambda method, path: _json({"major": "1", "minor": "35"}), https=True) as server:
        assert _api(server).get("/version") == {"major": "1", "minor": "35"}
    assert server.requests == [("GET", "/version", f"Bearer {TOKEN}")]


def test_an_answer_over_the_default_cap_is_refused():
    body = b" " * (ANSWER_LIMIT + 1)
    with (
        Server(lambda method, path: (200, {"Content-Type": "application/json"}, body), https=True) as server,
        pytest.raises(KubeError) as err,
    ):
        _api(server).get("/version")
    assert str(err.value) == "GET /version: the answer exceeds 8 MiB"
    assert err.value.kind == "answer"


def test_an_answer_at_the_cap_is_read_whole():
    body = json.dumps({"pad": "x" * (MiB - 20)}).encode()
    body += b" " * (MiB - len(body))
    with Server(lambda method, path: (200, {"Content-Type": "application/json"}, body), https=True) as server:
        assert len(_api(server).request("GET", "/version", limit=MiB)["pad"]) == MiB - 20


def test_a_declared_length_over_the_cap_is_refused_before_its_body_is_read():
    """The server declares 10 GiB, sends 1 MiB and holds the connection: only refusing at the headers ends
    the request before its 10 s deadline."""
    declared = {"Content-Type": "application/json", "Content-Length": str(10 * 1024 * MiB)}
    with Server(lambda method, path: (200, declared, b" " * MiB), https=True) as server:
        started = time.monotonic()
        with pytest.raises(KubeError) as err:
            _api(server, timeout=10).get("/version")
        elapsed = time.monotonic() - started
    assert str(err.value) == "GET /version: the answer exceeds 8 MiB" and elapsed < 10


@pytest.mark.parametrize("https", [True, False])
def test_an_endless_chunked_body_stops_at_the_cap(https):
    """No Content-Length and no end: reading stops after the cap, not at the deadline."""
    endless = (b"x" * 65536 for _ in range(100_000))
    with (
        Server(lambda method, path: (200, {"Content-Type": "text/plain"}, endless), https=https) as server,
        pytest.raises(AnswerTooLarge) as err,
    ):
        fetch(
            server.endpoint + "/logs",
            timeout=60,
            limit=MiB,
            context=ssl.create_default_context(cadata=tls().ca_pem) if https else None,
        )
    assert str(err.value) == "the answer exceeds 1 MiB"


def test_bench_endpoint_check_refuses_an_answer_over_the_cap():
    body = b" " * (ANSWER_LIMIT + 1)
    with (
        Server(lambda method, path: (200, {"Content-Type": "application/json"}, body), https=False) as server,
        pytest.raises(BenchError) as err,
    ):
        check_models(server.endpoint, "qwen3.5-9b")
    assert (
        str(err.value) == f"endpoint {server.endpoint}: GET /v1/models: the answer exceeds 8 MiB (is "
        f"{server.endpoint} the Serve endpoint, port 8000?)"
    )


def test_bench_endpoint_check_over_plain_http_without_a_token_still_works(plain_target):
    assert check_models(plain_target.endpoint, "qwen3.5-9b") == ["qwen3.5-9b"]
    assert plain_target.requests == [("GET", "/v1/models", "")]


def test_worker_logs_over_the_default_cap_still_reach_the_nixl_check(dev):
    """verify reads LOG_LINES lines of each worker log: up to verify.LOG_LIMIT (32 MiB), not the 8 MiB default."""
    log = (FIXTURES / "efa.log").read_bytes()
    log = b"INFO padding line of a chatty worker\n" * ((9 * MiB) // 37) + log
    assert ANSWER_LIMIT < len(log) < verify.LOG_LIMIT
    with FakeCluster(Scenario(raw={f"{HEAD}/api/v0/logs/file": (200, "text/plain", log)})) as fake:
        report = verify.run(dev, fake.api(), progress=lambda *a: None)
    check = report.find("NIXL transport")
    assert check.status == "pass", check.detail
