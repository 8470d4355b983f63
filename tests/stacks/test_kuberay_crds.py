"""The KubeRay CRD step: a custom resource the operator's release waits for, run like the kubectl handler
(its role, layers, subnets and security group), and its handler's commands and answers to CloudFormation.
Its kubectl command runs for real against the local cluster in tests/cluster/test_operator_bump.py."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest

from stacks.kuberay_crds import RESOURCE_TYPE, STARTUP_HEADROOM_SECONDS
from stacks.kuberay_crds_handler import index


def _crds(app_synth, stage="dev"):
    ((name, resource),) = app_synth.resources(stage, "cluster", RESOURCE_TYPE).items()
    return name, resource


def _function(app_synth, resource, stage="dev"):
    template = app_synth.template(stage, "cluster")["Resources"]
    return template[resource["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]["Properties"]


def _kubectl_handler(app_synth, stage="dev"):
    functions = app_synth.resources(stage, "cluster", "AWS::Lambda::Function")
    (handler,) = [f for n, f in functions.items() if n.startswith("ClusterKubectlProviderHandler")]
    return handler["Properties"]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_step_applies_the_stage_chart_from_the_release_repository(app_synth, stages, stage):
    _, resource = _crds(app_synth, stage)
    props = resource["Properties"]
    assert (props["Chart"], props["Repository"], props["Version"]) == (
        "kuberay-operator",
        "https://ray-project.github.io/kuberay-helm/",
        stages[stage].addons.kuberay_operator,
    )


def test_the_operators_release_waits_for_the_step(app_synth):
    name, _ = _crds(app_synth)
    charts = app_synth.resources("dev", "cluster", "Custom::AWSCDK-EKS-HelmChart")
    (release,) = [c for c in charts.values() if c["Properties"]["Release"] == "kuberay-operator"]
    assert name in release["DependsOn"]


def test_the_step_waits_for_the_kubectl_access_entry(app_synth):
    _, resource = _crds(app_synth)
    assert any(d.startswith("ClusterKubectlReadyBarrier") for d in resource["DependsOn"])


def test_the_step_runs_as_the_kubectl_handler_does(app_synth):
    _, resource = _crds(app_synth)
    mine, kubectl = _function(app_synth, resource), _kubectl_handler(app_synth)
    for key in ("Role", "VpcConfig", "Layers", "Runtime"):
        assert mine[key] == kubectl[key], key


def test_the_handler_ships_alone_in_its_asset(app_synth):
    _, resource = _crds(app_synth)
    key = _function(app_synth, resource)["Code"]["S3Key"]
    folder = app_synth.outdir / f"asset.{key.removesuffix('.zip')}"
    assert sorted(p.name for p in folder.iterdir()) == ["index.py"]


def test_the_pull_is_the_release_chart_at_its_version():
    assert index.pull_argv("kuberay-operator", "https://r/", "1.6.2", "/tmp/w") == [
        "helm",
        "pull",
        "kuberay-operator",
        "--repo",
        "https://r/",
        "--version",
        "1.6.2",
        "--untar",
        "--untardir",
        "/tmp/w",
    ]


def test_the_apply_is_server_side_and_takes_the_fields_over():
    argv = index.apply_argv("kubectl", "/w/crds", "/w/kubeconfig")
    assert argv[:4] == ["kubectl", "apply", "--server-side", "--force-conflicts"]
    assert f"--field-manager={index.FIELD_MANAGER}" in argv and argv[-2:] == ["-f", "/w/crds"]


class _Answers(BaseHTTPRequestHandler):
    received: ClassVar[list[dict]] = []

    def do_PUT(self):
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def cloudformation():
    """A stand-in for the pre-signed response URL: what the handler PUTs."""
    _Answers.received = []
    server = HTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/response", _Answers.received
    server.shutdown()


PULL = 'if [ "$1" = pull ]; then d="${@: -1}"; mkdir -p "$d/$2/crds"; fi'
# helm pull as a chart repository answers it when it is down: Helm's repository error with the HTTP status
# (helm.sh/helm/v4 v4.1.4 pkg/repo/v1/chartrepo.go and pkg/getter/httpgetter.go).
UNAVAILABLE = (
    'echo \'Error: looks like "https://r/" is not a valid chart repository or cannot be reached: '
    "failed to fetch https://r/index.yaml : 503 Service Unavailable' >&2; exit 1"
)
NOT_FOUND = 'echo \'Error: chart "kuberay-operator" version "1.6.2" not found in https://r/ repository\' >&2; exit 1'


def _tool(bin_dir, log, name: str, body: str) -> None:
    script = bin_dir / name
    script.write_text(f'#!/bin/bash\necho "{name} $*" >> {log}\n{body}\n')
    script.chmod(0o755)


@pytest.fixture
def tools_on_path(tmp_path, monkeypatch):
    """aws, helm and kubectl as scripts that log their argv (helm pull also unpacks a chart with crds/)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    for name, extra in (("aws", ""), ("helm", PULL), ("kubectl", "")):
        _tool(bin_dir, log, name, extra)
    monkeypatch.setattr(index, "PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setattr(index, "RETRY_PAUSE_SECONDS", 0)
    return log


def _helm_answers(log, *answers: str) -> None:
    """helm pull answers each call with the next of `answers` (a script body), the last one from then on."""
    bodies = "\n".join(f"  {n}) {body};;" for n, body in enumerate(answers[:-1], start=1))
    count = f"n=$(grep -c '^helm pull' {log})"
    _tool(log.parent / "bin", log, "helm", f"{count}\ncase $n in\n{bodies}\n  *) {answers[-1]};;\nesac")


def _event(kind: str, url: str) -> dict:
    return {
        "RequestType": kind,
        "ResponseURL": url,
        "StackId": "stack",
        "RequestId": "request",
        "LogicalResourceId": "KubeRayCrds",
        "ResourceProperties": {
            "ClusterName": "pd-dev",
            "Chart": "kuberay-operator",
            "Repository": "https://r/",
            "Version": "1.6.2",
        },
    }


def test_create_pulls_then_applies_and_answers_success(cloudformation, tools_on_path):
    url, received = cloudformation
    index.handler(_event("Create", url), None)
    calls = [line.split()[:2] for line in tools_on_path.read_text().splitlines()]
    assert calls == [["aws", "eks"], ["helm", "pull"], ["kubectl", "apply"]]
    assert [r["Status"] for r in received] == ["SUCCESS"]


def test_delete_leaves_the_crds_and_answers_success(cloudformation, tools_on_path):
    url, received = cloudformation
    index.handler(_event("Delete", url), None)
    assert not tools_on_path.exists()
    assert [r["Status"] for r in received] == ["SUCCESS"]


def test_a_failed_command_answers_failed_with_its_reason(cloudformation, tools_on_path, monkeypatch):
    url, received = cloudformation
    monkeypatch.setattr(index, "PATH", "/nonexistent")  # no aws: the first command cannot run
    index.handler(_event("Update", url), None)
    assert [r["Status"] for r in received] == ["FAILED"]
    assert "aws" in received[0]["Reason"]


def _pulls(log) -> int:
    return sum(line.startswith("helm pull") for line in log.read_text().splitlines())


def test_a_transient_pull_error_is_tried_once_more(cloudformation, tools_on_path):
    url, received = cloudformation
    _helm_answers(tools_on_path, UNAVAILABLE, PULL)
    index.handler(_event("Create", url), None)
    assert (_pulls(tools_on_path), [r["Status"] for r in received]) == (2, ["SUCCESS"])


def test_a_second_transient_pull_error_answers_failed(cloudformation, tools_on_path):
    url, received = cloudformation
    _helm_answers(tools_on_path, UNAVAILABLE)
    index.handler(_event("Create", url), None)
    assert (_pulls(tools_on_path), [r["Status"] for r in received]) == (2, ["FAILED"])
    assert "503 Service Unavailable" in received[0]["Reason"]


def test_a_permanent_pull_error_is_not_tried_again(cloudformation, tools_on_path):
    url, received = cloudformation
    _helm_answers(tools_on_path, NOT_FOUND)
    index.handler(_event("Create", url), None)
    assert (_pulls(tools_on_path), [r["Status"] for r in received]) == (1, ["FAILED"])


def test_a_hanging_step_answers_failed_once_its_bound_is_past(cloudformation, tools_on_path, monkeypatch):
    url, received = cloudformation
    _tool(tools_on_path.parent / "bin", tools_on_path, "kubectl", "sleep 30")
    monkeypatch.setitem(index.STEP_SECONDS, "apply", 1)
    started = time.monotonic()
    index.handler(_event("Create", url), None)
    assert time.monotonic() - started < 10
    assert [r["Status"] for r in received] == ["FAILED"]
    assert received[0]["Reason"].endswith("no answer within 1 s")


def test_a_pull_past_its_bound_counts_as_transient(tools_on_path, monkeypatch):
    _tool(tools_on_path.parent / "bin", tools_on_path, "helm", "sleep 30")
    with pytest.raises(index.StepError) as raised:
        index.run(["helm", "pull", "x"], {"PATH": index.PATH}, seconds=1)
    assert raised.value.transient


def test_the_lambdas_timeout_is_the_handlers_worst_case_and_its_headroom(app_synth):
    _, resource = _crds(app_synth)
    timeout = _function(app_synth, resource)["Timeout"]
    assert timeout == index.WORST_CASE_SECONDS + STARTUP_HEADROOM_SECONDS


def test_cloudformation_waits_a_minute_past_the_lambdas_timeout(app_synth):
    _, resource = _crds(app_synth)
    timeout = _function(app_synth, resource)["Timeout"]
    assert resource["Properties"]["ServiceTimeout"] == str(timeout + 60)
