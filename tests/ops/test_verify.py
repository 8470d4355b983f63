"""verify against a local fake of the Kubernetes API and the endpoints behind its service proxy
(tests/ops/fake_cluster.py), one test per verdict; plus the EKS token and the access errors."""

from __future__ import annotations

import base64
import io
import json
import socket
import time
import urllib.parse

import pytest
from botocore.stub import Stubber

from clients import nixl
from clients.kube import KubeApi, KubeError
from ops import eks_token, verify
from ops.__main__ import main

from ..charts.validators import crd_errors
from ..helpers import config_with
from .fake_cluster import FIXTURES, HEAD, SERVE, TOKEN, FakeCluster, Scenario, SlowServer, node, ray_service_status, tls


def _run(cfg, scenario, **kwargs):
    with FakeCluster(scenario) as fake:
        report = verify.run(cfg, fake.api(), progress=kwargs.pop("progress", lambda *a: None), **kwargs)
    return report


def _check(report, name):
    check = report.find(name)
    assert check is not None, [c.name for c in report.checks]
    return check


def test_fake_rayservice_status_is_valid_against_the_kuberay_crd():
    for status in (ray_service_status(), ray_service_status("DEPLOYING", ready=False, message="loading")):
        obj = {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "ray-llm"},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {}}}},
            "status": status,
        }
        assert crd_errors(obj) == []


def test_healthy_efa_stage_passes_every_check(dev):
    report = _run(dev, Scenario())
    assert report.exit_code == 0, report.table()
    assert _check(report, "NIXL transport").detail == (
        "10.0.40.17: LIBFABRIC on provider=efa (1 rails); 10.0.41.9: LIBFABRIC on provider=efa (1 rails)"
    )
    chat = _check(report, "POST /v1/chat/completions")
    assert chat.status == "pass" and chat.detail.endswith(
        's: "It splits prompt processing and token generation across GPUs."'
    )
    assert chat.data["latency_s"] >= 0


def test_tcp_fallback_fails_even_though_libfabric_was_instantiated(dev):
    report = _run(dev, Scenario(worker_logs={"10.0.40.17": "efa.log", "10.0.41.9": "tcp.log"}))
    check = _check(report, "NIXL transport")
    assert check.status == "fail"
    assert check.detail.startswith("worker 10.0.41.9: libfabric runs on provider=tcp, not efa")
    assert check.data["verdicts"] == {"10.0.40.17": "efa", "10.0.41.9": "tcp"}
    assert report.exit_code == 1


def test_ucx_backend_fails(dev):
    check = _check(_run(dev, Scenario(worker_logs={"10.0.40.17": "ucx.log", "10.0.41.9": "ucx.log"})), "NIXL transport")
    assert check.status == "fail" and "instantiated the UCX backend" in check.detail and "(and 1 more)" in check.detail


def test_missing_plugin_fails(dev):
    check = _check(
        _run(dev, Scenario(worker_logs={"10.0.40.17": "missing-plugin.log", "10.0.41.9": "efa.log"})), "NIXL transport"
    )
    assert check.status == "fail"
    assert check.detail == (
        "worker 10.0.40.17: a NIXL plugin is missing: [1764476323.512] [nixl] [W] Skipping "
        "backend registration for LIBFABRIC: missing plugin"
    )


def test_libfabric_without_provider_line_is_not_proof(dev):
    check = _check(
        _run(dev, Scenario(worker_logs={"10.0.40.17": "no-provider-line.log", "10.0.41.9": "efa.log"})),
        "NIXL transport",
    )
    assert check.status == "fail" and "NIXL_LOG_LEVEL=INFO" in check.detail


def test_application_not_running_fails_and_skips_the_rest(dev):
    report = _run(
        dev, Scenario(statuses=[ray_service_status("DEPLOYING", ready=False, message="Deploying app 'llm'.")])
    )
    check = _check(report, "RayService")
    assert (check.status, check.detail) == (
        "fail",
        "ray-llm ready=False, application llm DEPLOYING: Deploying app 'llm'. (Ready: ZeroServeEndpoints)",
    )
    assert {c.status for c in report.checks if c.name.startswith(("NIXL", "GET", "POST"))} == {"skip"}


def test_model_missing_from_v1_models_fails(dev):
    report = _run(dev, Scenario(models=["llama-3.1-8b"]))
    check = _check(report, "GET /v1/models")
    assert (check.status, check.detail) == ("fail", "'qwen3.5-9b' is not listed (listed: llama-3.1-8b)")
    assert _check(report, "POST /v1/chat/completions").status == "skip"


def test_gpu_node_without_efa_allocatable_fails(dev):
    report = _run(dev, Scenario(nodes=[node("ip-10-0-40-17"), node("ip-10-0-41-9", efa="0")]))
    check = _check(report, "GPU nodes")
    assert check.status == "fail"
    assert check.detail == "ip-10-0-41-9 has 0 vpc.amazonaws.com/efa allocatable (EFA device plugin running?)"


def test_waits_with_progress_until_the_application_runs(dev):
    waiting = ray_service_status("DEPLOYING", ready=False)
    scenario = Scenario(statuses=[waiting, waiting, ray_service_status()])
    clock = {"now": 0.0}
    lines = io.StringIO()
    report = _run(
        dev,
        scenario,
        wait=900,
        poll=10,
        progress=verify.Progress(lines),
        clock=lambda: clock["now"],
        sleep=lambda s: clock.__setitem__("now", clock["now"] + s),
    )
    assert report.exit_code == 0
    assert lines.getvalue().splitlines() == [
        "  [   0s/900s] waiting for RayService",
        "  [  10s/900s] waiting for RayService",
    ]


def test_gives_up_when_the_wait_is_over(dev):
    waiting = ray_service_status("DEPLOYING", ready=False)
    clock = {"now": 0.0}
    report = _run(
        dev,
        Scenario(statuses=[waiting]),
        wait=30,
        poll=10,
        clock=lambda: clock["now"],
        sleep=lambda s: clock.__setitem__("now", clock["now"] + s),
    )
    assert _check(report, "RayService").status == "fail" and clock["now"] == 30


def test_colocated_mode_skips_the_nixl_check(tmp_path):
    cfg = config_with(tmp_path, serving={"mode": "colocated"})
    report = _run(cfg, Scenario())
    assert _check(report, "NIXL transport").status == "skip" and report.exit_code == 0


def test_wrong_token_is_one_line(dev):
    with FakeCluster() as fake:
        report = verify.run(dev, fake.api("k8s-aws-v1.wrong"), progress=lambda *a: None)
    check = _check(report, "GPU nodes")
    assert check.detail == "GET /api/v1/nodes: HTTP 401 Unauthorized"


@pytest.mark.parametrize(
    "fixture, verdict",
    [
        ("efa.log", "efa"),
        ("tcp.log", "tcp"),
        ("ucx.log", "ucx"),
        ("missing-plugin.log", "missing-plugin"),
        ("no-provider-line.log", "no-provider-line"),
    ],
)
def test_log_classifier(fixture, verdict):
    assert nixl.classify((FIXTURES / fixture).read_text()).verdict == verdict


def test_classifier_prefers_a_fallback_over_a_healthy_line():
    text = (FIXTURES / "efa.log").read_text() + (FIXTURES / "tcp.log").read_text()
    assert nixl.classify(text).verdict == "tcp"
    assert nixl.classify("nothing here").verdict == "no-nixl"


# --- access -----------------------------------------------------------------------------------------


def test_token_is_a_presigned_sts_url_signing_the_cluster_name(aws):
    token = eks_token.token(aws, "pd-inference-dev", "us-west-2")
    assert token.startswith("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(token.removeprefix("k8s-aws-v1.") + "==").decode()
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    assert parts.netloc == "sts.us-west-2.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")


def test_private_endpoint_unreachable_says_run_inside_the_vpc(aws, dev):
    with socket.socket() as sock:  # a closed port on loopback: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    access = verify.ClusterAccess(endpoint=f"https://127.0.0.1:{port}", ca_data=tls().ca_data, private_only=True)
    with pytest.raises(verify.AccessError) as err:
        verify.connect(dev, aws, access)
    assert "private-only API endpoint" in str(err.value) and "run verify inside the VPC" in str(err.value)


def test_cluster_access_reads_endpoint_and_privacy_from_eks(aws, dev):
    iam = aws.client("iam")
    role = iam.create_role(RoleName="eks", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    aws.client("eks").create_cluster(
        name="pd-inference-dev",
        roleArn=role,
        resourcesVpcConfig={"subnetIds": ["subnet-1"], "endpointPublicAccess": False, "endpointPrivateAccess": True},
    )
    access = verify.cluster_access(dev, aws)
    assert access.private_only is True and access.endpoint.startswith("https://")


def test_verify_cli_without_a_cluster_exits_1_with_one_line(aws, tmp_path, capsys):
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        "verify --stage dev: cannot describe cluster pd-inference-dev in us-west-2: "
        "DescribeCluster: ResourceNotFoundException"
    )
    assert "\n" not in err and "Traceback" not in err


def test_verify_json_without_credentials_prints_the_failing_check_on_stdout(local_aws, capsys):
    assert main(["verify", "--stage", "dev", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], [(c["name"], c["status"]) for c in report["checks"]]) == (
        False,
        [("cluster access", "fail")],
    )
    (check,) = report["checks"]
    assert check["detail"] == "cannot describe cluster pd-inference-dev in us-west-2: no AWS credentials found"
    assert check["fix"] == "log in (aws sso login, or set AWS_PROFILE / AWS_ACCESS_KEY_ID) and run again"


def test_json_report(dev):
    report = _run(dev, Scenario())
    data = json.loads(report.to_json())
    assert data["ok"] is True and [c["name"] for c in data["checks"]] == [
        "GPU nodes",
        "KubeRay operator",
        "RayService",
        "NIXL transport",
        "GET /v1/models",
        "POST /v1/chat/completions",
        "KV transfer rate",
    ]


# --- answers no Kubernetes API server sends, and servers that answer too slowly ----------------------


def _one_line(text: str) -> None:
    assert text and "\n" not in text and "Traceback" not in text


@pytest.mark.parametrize("part", ["headers", "body"])
def test_a_server_that_trickles_bytes_is_cut_at_the_request_deadline(part):
    """A byte every 0.2 s never trips a socket timeout; the deadline of the whole request does."""
    with SlowServer(part=part, interval=0.2, https=True) as slow:
        started = time.monotonic()
        with pytest.raises(KubeError) as err:
            KubeApi(slow.endpoint, TOKEN, ca_data=slow.ca_data, timeout=1.0).get("/version")
        elapsed = time.monotonic() - started
    assert str(err.value) == (
        "GET /version: no complete answer within 1 s (the server answers too slowly, or "
        "something between holds the connection)"
    )
    # The server trickles forever: without the deadline the call would never return. The bound is loose
    # on purpose (a loaded machine is slow); the message names the 1 s deadline that fired.
    assert err.value.kind == "transport" and elapsed < 30


def test_a_trickling_api_server_fails_verify_in_one_line(aws, dev):
    with SlowServer(part="body", interval=0.2, https=True) as slow:
        access = verify.ClusterAccess(endpoint=slow.endpoint, ca_data=slow.ca_data, private_only=False)
        with pytest.raises(verify.AccessError) as err:
            verify.connect(dev, aws, access, timeout=1.0)
    _one_line(str(err.value))
    assert "GET /version: no complete answer within 1 s" in str(err.value)
    assert "public_access_cidrs" in str(err.value)


HTML = (200, "text/html", b"<html><head><title>Sign in to the corporate proxy</title></head><body>...</body></html>")


def test_an_html_page_instead_of_the_api_says_so_with_the_fix(aws, dev):
    with FakeCluster(Scenario(raw={"/version": HTML})) as fake:
        access = verify.ClusterAccess(endpoint=fake.endpoint, ca_data=fake.ca_data, private_only=False)
        with pytest.raises(verify.AccessError) as err:
            verify.connect(dev, aws, access)
    _one_line(str(err.value))
    assert str(err.value).startswith(
        f"{fake.endpoint} did not answer as the Kubernetes API of pd-inference-dev: GET /version: the answer is not "
        f'JSON (text/html: "<html><head><title>Sign in to the corporate proxy</title></head><body>...</body>..."): '
        f"not what a Kubernetes API server sends"
    )
    assert str(err.value).endswith(
        "-> the endpoint did not answer as a Kubernetes API server: a proxy in between? (check HTTPS_PROXY)"
    )


NODES = "/api/v1/nodes"
OPERATOR = "/apis/apps/v1/namespaces/kuberay-system/deployments/kuberay-operator"
RAYSERVICE = "/apis/ray.io/v1/namespaces/inference/rayservices/ray-llm"


def _json(payload) -> tuple:
    return 200, "application/json", json.dumps(payload).encode()


@pytest.mark.parametrize(
    "path, answer, check, detail",
    [
        (NODES, HTML, "GPU nodes", "GET /api/v1/nodes: the answer is not JSON (text/html: "),
        (NODES, _json({"items": "none"}), "GPU nodes", "GET /api/v1/nodes: unexpected answer (TypeError: "),
        (NODES, _json({"kind": "NodeList"}), "GPU nodes", "GET /api/v1/nodes: unexpected answer (no field 'items')"),
        (
            NODES,
            _json({"items": [{"status": {}}]}),
            "GPU nodes",
            "GET /api/v1/nodes: unexpected answer (no field 'metadata')",
        ),
        (NODES, _json([1, 2]), "GPU nodes", "GET /api/v1/nodes: unexpected answer (TypeError: "),
        (
            OPERATOR,
            _json({"status": {"availableReplicas": "many"}}),
            "KubeRay operator",
            f"GET {OPERATOR}: unexpected answer (ValueError: ",
        ),
        (
            RAYSERVICE,
            _json({"status": {"conditions": "Ready"}}),
            "RayService",
            f"GET {RAYSERVICE}: unexpected answer (AttributeError: ",
        ),
        (
            RAYSERVICE,
            _json(["not", "an", "object"]),
            "RayService",
            f"GET {RAYSERVICE}: unexpected answer (AttributeError: ",
        ),
    ],
)
def test_an_answer_of_the_wrong_shape_fails_its_check_in_one_line(path, answer, check, detail, dev):
    report = _run(dev, Scenario(raw={path: answer}))
    found = _check(report, check)
    assert found.status == "fail" and found.detail.startswith(detail), found.detail
    assert (
        found.fix == "the endpoint did not answer as a Kubernetes API server: a proxy in between? (check HTTPS_PROXY)"
    )
    assert report.exit_code == 1


@pytest.mark.parametrize(
    "path, answer, check, detail",
    [
        (f"{SERVE}/v1/models", _json({"data": {"id": "qwen3.5-9b"}}), "GET /v1/models", "unexpected answer ("),
        (f"{SERVE}/v1/models", HTML, "GET /v1/models", f"GET {SERVE}/v1/models: the answer is not JSON (text/html: "),
        (
            f"{SERVE}/v1/chat/completions",
            _json({"choices": []}),
            "POST /v1/chat/completions",
            "unexpected answer (IndexError: list index out of range): not an OpenAI chat completion",
        ),
        (
            f"{HEAD}/api/v0/nodes",
            _json({"data": {"result": "x"}}),
            "NIXL transport",
            "cannot read the workers' logs through the Ray dashboard: unexpected answer (",
        ),
    ],
)
def test_an_endpoint_behind_the_proxy_answering_the_wrong_shape_fails_in_one_line(path, answer, check, detail, dev):
    report = _run(dev, Scenario(raw={path: answer}))
    found = _check(report, check)
    assert found.status == "fail" and found.detail.startswith(detail), found.detail
    _one_line(found.detail)


def _stubbed_eks(monkeypatch, session, response):
    eks = session.client("eks", region_name="us-west-2")
    stub = Stubber(eks)
    stub.add_response("describe_cluster", response, {"name": "pd-inference-dev"})
    stub.activate()
    real = session.client
    monkeypatch.setattr(session, "client", lambda name, **kw: eks if name == "eks" else real(name, **kw))


@pytest.mark.parametrize(
    "cluster",
    [
        {"name": "pd-inference-dev", "status": "CREATING"},
        {"name": "pd-inference-dev", "status": "CREATING", "endpoint": ""},
        {},
    ],
)
def test_describe_cluster_without_an_endpoint_says_to_wait_for_active(cluster, aws, monkeypatch, capsys):
    _stubbed_eks(monkeypatch, aws, {"cluster": cluster})
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err.strip()
    _one_line(err)
    status = cluster.get("status", "UNKNOWN")
    assert err == (
        f"verify --stage dev: cluster pd-inference-dev in us-west-2 has no API endpoint yet (status "
        f"{status}): wait until it is ACTIVE (aws eks describe-cluster --name pd-inference-dev --region "
        f"us-west-2) and run again"
    )


def test_describe_cluster_without_a_cluster_object_is_one_line(aws, monkeypatch, capsys):
    _stubbed_eks(monkeypatch, aws, {})
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err.strip()
    _one_line(err)
    assert "DescribeCluster answered without a cluster object" in err


def test_describe_cluster_without_ca_or_vpc_fields_still_connects(aws, monkeypatch, dev):
    _stubbed_eks(
        monkeypatch,
        aws,
        {
            "cluster": {
                "name": "pd-inference-dev",
                "status": "ACTIVE",
                "endpoint": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
            }
        },
    )
    access = verify.cluster_access(dev, aws)
    assert access == verify.ClusterAccess("https://ABC.gr7.us-west-2.eks.amazonaws.com", None, False)


def test_missing_cluster_says_to_deploy_the_stage(aws, capsys):
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "-> deploy the stage first (scripts/cdk deploy -c stage=dev 'dev/*'), or check the stage's region"
    )


@pytest.mark.parametrize(
    "status, fix",
    [
        (
            401,
            (
                "the API server refused the token: these credentials need an EKS access entry "
                "(cluster.admin_principal_arns) on this cluster"
            ),
        ),
        (
            403,
            (
                "the identity may not read this: add it to cluster.admin_principal_arns, or use the verify runner "
                "(verify-remote), whose access entry has the read-only verify role"
            ),
        ),
        (404, "the kuberay-operator Helm release is missing: deploy the cluster stack (it installs the operator)"),
    ],
)
def test_operator_fix_follows_the_http_status(status, fix, dev):
    report = _run(
        dev,
        Scenario(
            raw={OPERATOR: (status, "application/json", json.dumps({"kind": "Status", "message": "no"}).encode())}
        ),
    )
    check = _check(report, "KubeRay operator")
    assert check.detail == f"GET {OPERATOR}: HTTP {status} no" and check.fix == fix


def test_missing_rayservice_says_to_deploy_the_serving_stack(dev):
    report = _run(
        dev,
        Scenario(
            raw={RAYSERVICE: (404, "application/json", json.dumps({"kind": "Status", "message": "not found"}).encode())}
        ),
    )
    check = _check(report, "RayService")
    assert (check.status, check.detail) == ("fail", f"GET {RAYSERVICE}: HTTP 404 not found")
    assert check.fix == (
        "the RayService is missing: deploy the serving stack (scripts/cdk deploy -c stage=dev 'dev/Serving')"
    )


# --- text from the cluster reaches the terminal through one sanitizer (clients/text.py shown) ---------------

HOSTILE_IDS = ["\x1b[2J\x1b[Hqwen", "m\rPASS  all checks", "x\u202ey", "bell\x07\x9b31m", "line\u2028two"]


def _terminal_safe(text: str) -> bool:
    """Nothing a terminal acts on: no control character but the line breaks between lines, no bidi control."""
    return all(ch == "\n" or ch.isprintable() for ch in text)


def test_model_ids_holding_control_characters_are_shown_escaped(dev):
    report = _run(dev, Scenario(models=HOSTILE_IDS))
    table = report.table()
    assert _check(report, "GET /v1/models").status == "fail" and _terminal_safe(table), repr(table)
    assert "\\x1b[2J\\x1b[Hqwen" in table and "x\\u202ey" in table and "bell\\x07\\x9b31m" in table


def test_fifty_thousand_ids_are_one_bounded_line_with_a_count_of_what_was_cut(dev):
    report = _run(dev, Scenario(models=[f"model-{i}" for i in range(50_000)]))  # the fake's list: within 8 MiB
    detail = _check(report, "GET /v1/models").detail
    assert len(detail) < 500 and detail.endswith("more characters)"), detail[-80:]
    assert max(len(line) for line in report.table().splitlines()) < 600


@pytest.mark.parametrize(
    "message",
    [
        "forbidden\r\x1b[2Kverify --stage dev: OK",  # a raw CR and an erase-line sequence in a Status message
        "denied\u202e KO",
        "x" * 100_000,
    ],
)
def test_an_access_error_quoting_the_cluster_is_one_safe_bounded_line(aws, monkeypatch, capsys, message):
    def refuse(*args, **kwargs):
        raise verify.AccessError(f"the Kubernetes API of pd-inference-dev refused verify: {message}")

    monkeypatch.setattr(verify, "cluster_access", refuse)
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and _terminal_safe(err) and len(err) < 600, repr(err[:200])
    assert err.startswith("verify --stage dev: the Kubernetes API of pd-inference-dev refused verify: ")


def test_an_internal_error_quoting_the_cluster_is_one_safe_line(aws, monkeypatch, capsys):
    def crash(*args, **kwargs):
        raise RuntimeError("\x1b]0;pwned\x07boom\r")

    monkeypatch.setattr(verify, "cluster_access", crash)
    assert main(["verify", "--stage", "dev"], session=aws) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and _terminal_safe(err) and "\\x1b]0;pwned\\x07boom\\x0d" in err, repr(err)
