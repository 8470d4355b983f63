"""The Ray pod templates are cdk8s-plus-28's typed structs (charts/ray_pods.py): a misspelt field fails where it
is written, and the library's serialiser gives the plain JSON the RayService embeds, in the order written."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml
from cdk8s_plus_28 import k8s

from charts import ray_pods
from charts.ray_pods import plain_container, plain_template, typed
from charts.render import to_yaml

from ..helpers import ROOT


def test_a_misspelt_field_fails_where_it_is_written():
    with pytest.raises(TypeError, match="securityContex"):
        typed(k8s.Container, name="ray-head", securityContex=k8s.SecurityContext(privileged=False))
    with pytest.raises(TypeError, match="securityContex"):
        k8s.Container(name="ray-head", securityContex=k8s.SecurityContext(privileged=False))
    with pytest.raises(TypeError, match="allowPrivilegeEscalaton"):  # a nested dict is a struct too
        k8s.Container(name="ray-head", security_context={"allowPrivilegeEscalaton": False})


def test_mypy_finds_a_misspelt_or_mistyped_field_before_anything_runs(tmp_path):
    # `typed` takes the struct constructor's own parameters, and the pod templates typed parameters of their own.
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from cdk8s_plus_28 import k8s\n"
        "from charts.ray_pods import head_pod_template, typed\n"
        'typed(k8s.Container, name="ray-head", securityContex=None)\n'
        'typed(k8s.ContainerPort, name="serve", container_port="8000")\n'
        'head_pod_template(image="i", resource=None, service_account="sa", token=None, labels={})\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(probe)],
        cwd=ROOT,  # pyproject.toml's configuration, and the cache test_lint's run fills
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    errors = re.findall(r"probe\.py:(\d+): error: (.*)", run.stdout)
    assert [(int(line), message.rsplit("  [", 1)[-1]) for line, message in errors] == [
        (3, "call-arg]"),
        (4, "arg-type]"),
        (5, "call-arg]"),
    ], run.stdout + run.stderr
    assert '"securityContex"' in errors[0][1] and '"container_port"' in errors[1][1] and '"resource"' in errors[2][1]
    assert run.returncode == 1


def test_a_mistyped_field_fails_where_it_is_written():
    with pytest.raises(TypeError, match="container_port"):
        k8s.ContainerPort(name="serve", container_port="8000")
    with pytest.raises(TypeError, match="size_limit"):  # a Quantity, not its string
        k8s.EmptyDirVolumeSource(size_limit="8Gi")
    with pytest.raises(TypeError, match="k8s.Quantity"):  # inside a map: the chart's own check
        ray_pods._resources({"cpu": "2"}, {})


def test_the_serialiser_round_trips_quantities_and_int_or_string_ports():
    container = typed(
        k8s.Container,
        name="ray-head",
        image="ray:tag",
        ports=[typed(k8s.ContainerPort, name="dashboard", container_port=8265, host_ip="127.0.0.1")],
        resources=typed(
            k8s.ResourceRequirements,
            requests={"cpu": k8s.Quantity.from_string("2"), "memory": k8s.Quantity.from_string("8Gi")},
            limits={"cpu": k8s.Quantity.from_number(3), "nvidia.com/gpu": k8s.Quantity.from_string("1")},
        ),
        readiness_probe=typed(
            k8s.Probe,
            http_get=typed(k8s.HttpGetAction, path="/-/healthz", port=k8s.IntOrString.from_string("dashboard")),
            period_seconds=5,
        ),
        liveness_probe=typed(k8s.Probe, tcp_socket=typed(k8s.TcpSocketAction, port=k8s.IntOrString.from_number(6379))),
    )
    expected = {
        "name": "ray-head",
        "image": "ray:tag",
        # Kubernetes' field names, not jsii's (hostIp): the library maps them.
        "ports": [{"name": "dashboard", "containerPort": 8265, "hostIP": "127.0.0.1"}],
        # A Quantity is its value: a string stays a string ('2', as the chart always wrote it), a number a number.
        "resources": {
            "requests": {"cpu": "2", "memory": "8Gi"},
            "limits": {"cpu": 3, "nvidia.com/gpu": "1"},
        },
        "readinessProbe": {"httpGet": {"path": "/-/healthz", "port": "dashboard"}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 6379}},
    }
    plain = plain_container(container)
    assert plain == expected
    assert list(plain) == list(expected)  # the order written, not the library's (alphabetical)
    assert list(plain["resources"]) == ["requests", "limits"] and list(plain["ports"][0]) == list(expected["ports"][0])
    text = to_yaml([plain])
    assert "cpu: '2'" in text and "cpu: 3" in text and "port: 6379" in text and "port: dashboard" in text
    assert yaml.safe_load(text) == expected


def test_a_struct_not_built_by_typed_keeps_the_librarys_order():
    plain = plain_container(k8s.Container(name="x", image="i", command=["true"]))
    assert list(plain) == ["command", "image", "name"]


def test_the_pod_templates_are_typed_and_serialise_to_plain_json(dev):
    from config.derived import worker_resources

    arguments = {"service_account": "sa", "token": ray_pods.TokenMount("spc"), "labels": {"a": "b"}, "image": "i"}
    head = ray_pods.head_pod_template(resources=dev.serving.head_resources, **arguments)
    assert isinstance(head, k8s.PodTemplateSpec)
    (container,) = plain_template(head)["spec"]["containers"]
    assert container["name"] == "ray-head" and container["env"][0] == {
        "name": "NVIDIA_VISIBLE_DEVICES",
        "value": "void",
    }
    worker = dict(
        resources=worker_resources(dev),
        privilege="ipc_lock",
        weight_cache=dev.serving.weight_cache,
        log_relay=True,
        **arguments,
    )
    template = ray_pods.worker_pod_template(**worker)
    assert isinstance(template.spec.containers[0], k8s.Container)
    plain = ray_pods.plain_template(template)
    assert [c["name"] for c in plain["spec"]["containers"]] == ["ray-worker", "ray-log-relay"]
    assert plain["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        "runAsUser": 0,  # an added capability is effective only for root (charts/ray_pods.py)
    }
    assert plain["spec"]["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}}


@pytest.mark.parametrize("efa", [True, False])
def test_the_typed_worker_env_serialises_to_the_plain_data_the_rehearsal_gives_the_engines(efa):
    # One source for the pod template's env and the rehearsal's engines (charts/worker_env.py): the typed
    # EnvVars built from it serialise back to exactly it.
    from charts.worker_env import worker_environment

    typed_env = plain_container(typed(k8s.Container, name="ray-worker", env=ray_pods.worker_env(efa=efa)))["env"]
    assert typed_env == worker_environment(efa=efa)
    with_metrics = ray_pods.worker_env(efa=efa, nixl_metrics=True)
    assert plain_container(typed(k8s.Container, name="ray-worker", env=with_metrics))["env"] == worker_environment(
        efa=efa, nixl_metrics=True
    )
    assert typed_env[: 3 if efa else 2] == (
        [
            {"name": "FI_PROVIDER", "value": "efa"},
            {"name": "FI_EFA_USE_HUGE_PAGE", "value": "0"},
            {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
        if efa
        else [
            {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"},
        ]
    )
