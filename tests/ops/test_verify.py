"""verify against a local fake of the Kubernetes API and the endpoints behind its service proxy
(tests/ops/fake_cluster.py), one test per verdict; plus the EKS token and the access errors."""
from __future__ import annotations

import base64
import io
import json
import socket
import urllib.parse

import boto3
import pytest
from moto import mock_aws

from ops import eks_token, nixl, verify
from ops.__main__ import main
from ops.kube import KubeApi

from ..charts.validators import crd_errors
from ..helpers import config_with
from .fake_cluster import FIXTURES, TOKEN, FakeCluster, Scenario, node, ray_service_status


def _run(cfg, scenario, **kwargs):
    with FakeCluster(scenario) as fake:
        report = verify.run(cfg, KubeApi(fake.endpoint, TOKEN), progress=kwargs.pop("progress", lambda *a: None),
                            **kwargs)
    return report


def _check(report, name):
    check = report.find(name)
    assert check is not None, [c.name for c in report.checks]
    return check


def test_fake_rayservice_status_is_valid_against_the_kuberay_crd():
    for status in (ray_service_status(), ray_service_status("DEPLOYING", ready=False, message="loading")):
        obj = {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "ray-llm"},
               "spec": {"rayClusterConfig": {"headGroupSpec": {"rayStartParams": {}, "template": {}}}},
               "status": status}
        assert crd_errors(obj) == []


def test_healthy_efa_stage_passes_every_check(dev):
    report = _run(dev, Scenario())
    assert report.exit_code == 0, report.table()
    assert _check(report, "NIXL transport").detail == ("10.0.40.17: LIBFABRIC on provider=efa (1 rails); "
                                                       "10.0.41.9: LIBFABRIC on provider=efa (1 rails)")
    chat = _check(report, "POST /v1/chat/completions")
    assert chat.status == "pass" and chat.detail.endswith('s: "It splits prompt processing and token generation '
                                                          'across GPUs."')
    assert chat.data["latency_s"] >= 0


def test_tcp_fallback_fails_even_though_libfabric_was_instantiated(dev):
    report = _run(dev, Scenario(worker_logs={"10.0.40.17": "efa.log", "10.0.41.9": "tcp.log"}))
    check = _check(report, "NIXL transport")
    assert check.status == "fail"
    assert check.detail.startswith("worker 10.0.41.9: libfabric runs on provider=tcp, not efa")
    assert check.data["verdicts"] == {"10.0.40.17": "efa", "10.0.41.9": "tcp"}
    assert report.exit_code == 1


def test_ucx_backend_fails(dev):
    check = _check(_run(dev, Scenario(worker_logs={"10.0.40.17": "ucx.log", "10.0.41.9": "ucx.log"})),
                   "NIXL transport")
    assert check.status == "fail" and "instantiated the UCX backend" in check.detail and "(and 1 more)" in check.detail


def test_missing_plugin_fails(dev):
    check = _check(_run(dev, Scenario(worker_logs={"10.0.40.17": "missing-plugin.log", "10.0.41.9": "efa.log"})),
                   "NIXL transport")
    assert check.status == "fail"
    assert check.detail == ("worker 10.0.40.17: a NIXL plugin is missing: [1764476323.512] [nixl] [W] Skipping "
                            "backend registration for LIBFABRIC: missing plugin")


def test_libfabric_without_provider_line_is_not_proof(dev):
    check = _check(_run(dev, Scenario(worker_logs={"10.0.40.17": "no-provider-line.log", "10.0.41.9": "efa.log"})),
                   "NIXL transport")
    assert check.status == "fail" and "NIXL_LOG_LEVEL=INFO" in check.detail


def test_application_not_running_fails_and_skips_the_rest(dev):
    report = _run(dev, Scenario(statuses=[ray_service_status("DEPLOYING", ready=False,
                                                               message="Deploying app 'llm'.")]))
    check = _check(report, "RayService")
    assert (check.status, check.detail) == ("fail", "ray-llm ready=False, application llm DEPLOYING: "
                                                    "Deploying app 'llm'.")
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
    report = _run(dev, scenario, wait=900, poll=10, progress=verify.Progress(lines),
                  clock=lambda: clock["now"], sleep=lambda s: clock.__setitem__("now", clock["now"] + s))
    assert report.exit_code == 0
    assert lines.getvalue().splitlines() == ["  [   0s/900s] waiting for RayService",
                                             "  [  10s/900s] waiting for RayService"]


def test_gives_up_when_the_wait_is_over(dev):
    waiting = ray_service_status("DEPLOYING", ready=False)
    clock = {"now": 0.0}
    report = _run(dev, Scenario(statuses=[waiting]), wait=30, poll=10,
                  clock=lambda: clock["now"], sleep=lambda s: clock.__setitem__("now", clock["now"] + s))
    assert _check(report, "RayService").status == "fail" and clock["now"] == 30


def test_colocated_mode_skips_the_nixl_check(tmp_path):
    cfg = config_with(tmp_path, serving={"mode": "colocated"})
    report = _run(cfg, Scenario())
    assert _check(report, "NIXL transport").status == "skip" and report.exit_code == 0


def test_wrong_token_is_one_line(dev):
    with FakeCluster() as fake:
        report = verify.run(dev, KubeApi(fake.endpoint, "k8s-aws-v1.wrong"), progress=lambda *a: None)
    check = _check(report, "GPU nodes")
    assert check.detail == "GET /api/v1/nodes: HTTP 401 Unauthorized"


@pytest.mark.parametrize("fixture, verdict", [("efa.log", "efa"), ("tcp.log", "tcp"), ("ucx.log", "ucx"),
                                              ("missing-plugin.log", "missing-plugin"),
                                              ("no-provider-line.log", "no-provider-line")])
def test_log_classifier(fixture, verdict):
    assert nixl.classify((FIXTURES / fixture).read_text()).verdict == verdict


def test_classifier_prefers_a_fallback_over_a_healthy_line():
    text = (FIXTURES / "efa.log").read_text() + (FIXTURES / "tcp.log").read_text()
    assert nixl.classify(text).verdict == "tcp"
    assert nixl.classify("nothing here").verdict == "no-nixl"


# --- access -----------------------------------------------------------------------------------------

@pytest.fixture
def aws(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.session.Session(region_name="us-west-2")


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
    access = verify.ClusterAccess(endpoint=f"http://127.0.0.1:{port}", ca_data=None, private_only=True)
    with pytest.raises(verify.AccessError) as err:
        verify.connect(dev, aws, access)
    assert "private-only API endpoint" in str(err.value) and "run verify inside the VPC" in str(err.value)


def test_cluster_access_reads_endpoint_and_privacy_from_eks(aws, dev):
    iam = aws.client("iam")
    role = iam.create_role(RoleName="eks", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    aws.client("eks").create_cluster(name="pd-inference-dev", roleArn=role, resourcesVpcConfig={
        "subnetIds": ["subnet-1"], "endpointPublicAccess": False, "endpointPrivateAccess": True})
    access = verify.cluster_access(dev, aws)
    assert access.private_only is True and access.endpoint.startswith("https://")


def test_verify_cli_without_a_cluster_exits_1_with_one_line(aws, tmp_path, capsys):
    assert main(["verify", "--stage", "dev"], session=aws) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("verify --stage dev: cannot describe cluster pd-inference-dev in us-west-2: "
                          "DescribeCluster: ResourceNotFoundException")
    assert "\n" not in err and "Traceback" not in err


def test_json_report(dev):
    report = _run(dev, Scenario())
    data = json.loads(report.to_json())
    assert data["ok"] is True and [c["name"] for c in data["checks"]] == [
        "GPU nodes", "KubeRay operator", "RayService", "NIXL transport", "GET /v1/models",
        "POST /v1/chat/completions"]
