"""An answer of the API server that cannot be read is one line naming the request, never an internal error:
JSON nested past Python's recursion limit (a RecursionError in json.loads), or nested deep enough for the code
that walks, prints or re-encodes it to overflow (bounded at clients.kube.MAX_DEPTH levels), in a success or in an
error status; and a check whose answer is such fails alone, in one line, with the fix for answers that are
not Kubernetes'."""

from __future__ import annotations

import json

import pytest

from clients.kube import MAX_DEPTH, KubeApi, KubeError
from ops import verify

from .fake_cluster import TOKEN, FakeCluster, Scenario, ray_service_status, tls
from .http_server import Server


def _nested(depth: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * depth + b"1" + closer * depth


DEEP = {
    "past the recursion limit": _nested(100_000),
    "objects past the recursion limit": b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    "one level over the bound": _nested(MAX_DEPTH + 1),
    "deep inside a normal object": b'{"kind": "NodeList", "items": [' + _nested(MAX_DEPTH) + b"]}",
}
TOO_DEEP = f"the answer nests arrays or objects more than {MAX_DEPTH} levels deep"


def _api(body: bytes, status: int = 200) -> tuple[Server, KubeApi]:
    server = Server(lambda method, path: (status, {"Content-Type": "application/json"}, body), https=True)
    return server, KubeApi(server.endpoint, TOKEN, ca_data=tls().ca_data, timeout=10)


@pytest.mark.parametrize("body", DEEP.values(), ids=DEEP.keys())
def test_a_too_deep_answer_is_one_line_naming_the_request(body):
    server, api = _api(body)
    with server, pytest.raises(KubeError) as err:
        api.get("/api/v1/nodes")
    assert err.value.kind == "answer"
    assert str(err.value) == f"GET /api/v1/nodes: {TOO_DEEP}: not what a Kubernetes API server sends"


def test_an_answer_at_the_bound_is_read():
    server, api = _api(_nested(MAX_DEPTH))
    with server:
        answer = api.get("/api/v1/nodes")
    assert repr(answer).count("[") == MAX_DEPTH


@pytest.mark.parametrize("body", DEEP.values(), ids=DEEP.keys())
def test_a_too_deep_error_status_keeps_its_status_in_one_line(body):
    server, api = _api(body, status=500)
    with server, pytest.raises(KubeError) as err:
        api.get("/api/v1/nodes")
    assert (err.value.kind, err.value.status) == ("http", 500)
    message = str(err.value)
    assert message.startswith("GET /api/v1/nodes: HTTP 500 ") and "\n" not in message and len(message) < 700


@pytest.mark.parametrize("body", DEEP.values(), ids=DEEP.keys())
def test_a_check_whose_answer_is_too_deep_fails_alone_in_one_line(dev, body):
    scenario = Scenario(raw={"/api/v1/nodes": (200, "application/json", body)})
    with FakeCluster(scenario) as fake:
        report = verify.run(dev, fake.api(), progress=lambda *a: None)
    nodes = report.find("GPU nodes")
    assert (
        nodes.status == "fail"
        and nodes.detail == f"GET /api/v1/nodes: {TOO_DEEP}: not what a Kubernetes API server sends"
    )
    assert nodes.fix.startswith("the endpoint did not answer as a Kubernetes API server")
    assert report.find("KubeRay operator").status == "pass"
    assert report.exit_code == 1


@pytest.mark.parametrize("reason", [5, ["Ready", "no"], {"a": 1}, None, True])
def test_a_condition_reason_of_another_type_is_shown_not_an_internal_error(dev, reason):
    status = ray_service_status(ready=False)
    status["conditions"][0].update(reason=reason, message="")
    rayservice = {"apiVersion": "ray.io/v1", "kind": "RayService", "status": status}
    path = "/apis/ray.io/v1/namespaces/inference/rayservices/ray-llm"
    scenario = Scenario(raw={path: (200, "application/json", json.dumps(rayservice).encode())})
    with FakeCluster(scenario) as fake:
        report = verify.run(dev, fake.api(), progress=lambda *a: None)
    found = report.find("RayService")
    assert found.status == "fail" and "\n" not in found.detail


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_a_number_no_float_holds_is_not_json(number):
    """Python's json takes NaN and Infinity, and reads 1e400 as inf: a readyReplicas of inf is above any count."""
    server, api = _api(b'{"kind": "Deployment", "status": {"readyReplicas": ' + number + b"}}")
    with server, pytest.raises(KubeError) as err:
        api.get("/apis/apps/v1/namespaces/x/deployments/y")
    assert err.value.kind == "answer"
    assert str(err.value).startswith("GET /apis/apps/v1/namespaces/x/deployments/y: the answer is not JSON (")
