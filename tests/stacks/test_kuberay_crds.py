"""The KubeRay CRD step: a custom resource the operator's release waits for, run like the kubectl handler
(its role, layers, subnets and security group), and its handler's commands and answers to CloudFormation.
Its kubectl command runs for real against the local cluster in tests/cluster/test_operator_bump.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import ClassVar

import pytest

from stacks.kuberay_crds import RESOURCE_TYPE
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


@pytest.fixture
def tools_on_path(tmp_path, monkeypatch):
    """aws, helm and kubectl as scripts that log their argv (helm pull also unpacks a chart with crds/)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    pull = 'if [ "$1" = pull ]; then d="${@: -1}"; mkdir -p "$d/$2/crds"; fi'
    for name, extra in (("aws", ""), ("helm", pull), ("kubectl", "")):
        script = bin_dir / name
        script.write_text(f'#!/bin/bash\necho "{name} $*" >> {log}\n{extra}\n')
        script.chmod(0o755)
    monkeypatch.setattr(index, "PATH", f"{bin_dir}:/usr/bin:/bin")
    return log


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
