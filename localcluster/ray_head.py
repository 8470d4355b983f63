"""A stand-in for every Ray head the operator talks to: an HTTP proxy on loopback that answers each request
itself and never dials out.

The operator runs with HTTP_PROXY pointing here, so its plain-HTTP calls to pod IPs and to the per-cluster head
Service (names no resolver here knows) arrive as proxy requests with the absolute URL. It answers what a
healthy Ray 2.58 head answers to exactly the calls KubeRay 1.6.2 makes (ray-operator/controllers/ray/utils/
dashboardclient/dashboard_httpclient.go and httpproxy_httpclient.go):
- GET :8000/-/healthz: `success` (the Serve proxy's health, which decides the head's `ray.io/serve` label);
- PUT :8265/api/serve/applications/: the Serve config, kept per host;
- GET :8265/api/serve/applications/: every application of that host's last PUT, RUNNING.
Anything else is answered 404 (CONNECT 405) and logged, so an unexpected call shows up in the report."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

from .pki import LOOPBACK

HEALTH_PATH = "/-/healthz"  # ray-operator/controllers/ray/utils/constant.go RayServeProxyHealthPath
SERVE_APPLICATIONS = "/api/serve/applications/"  # dashboardclient/dashboard_httpclient.go DeployPathV2
MAX_BODY = 4 * 2**20


@dataclass(frozen=True)
class Call:
    """One request the operator made."""

    at: float
    method: str
    host: str  # host:port of the absolute URL
    path: str
    status: int
    body: bytes = b""


@dataclass
class RayHeadState:
    calls: list[Call] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> last PUT body
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def puts(self) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == "PUT"]

    def unexpected(self) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.status >= 400]


def serve_details(config: dict[str, Any] | None) -> dict[str, Any]:
    """The GET answer: each application of the config as Ray's ServeDetails reports a healthy one."""
    applications = {}
    for app in (config or {}).get("applications") or []:
        name = app.get("name", "default")
        applications[name] = {
            "name": name,
            "status": "RUNNING",
            "message": "",
            "route_prefix": app.get("route_prefix"),
            "deployments": {},
        }
    return {"deploy_mode": "MULTI_APP", "applications": applications}


class _RayHeadHandler(BaseHTTPRequestHandler):
    """The answers; `state` is set on the subclass that _handler makes for one stand-in."""

    protocol_version = "HTTP/1.1"
    state: RayHeadState

    def log_message(self, format: str, *args: Any) -> None:
        """Calls are recorded in `state`, not printed."""

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        url = urlsplit(self.path)
        request_body = getattr(self, "_request_body", b"")
        self.state.record(Call(time.time(), self.command, url.netloc, url.path, status, request_body))
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        self._request_body = self.rfile.read(min(length, MAX_BODY))
        return self._request_body

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == HEALTH_PATH:
            self._answer(200, b"success")
        elif url.path == SERVE_APPLICATIONS:
            with self.state.lock:
                config = self.state.configs.get(url.netloc)
            self._answer(200, json.dumps(serve_details(config)).encode(), "application/json")
        else:
            self._answer(404, b"not served by the stand-in Ray head")

    def do_PUT(self) -> None:
        url = urlsplit(self.path)
        body = self._read_body()
        if url.path != SERVE_APPLICATIONS:
            self._answer(404, b"not served by the stand-in Ray head")
            return
        try:
            config = json.loads(body)
        except ValueError:
            self._answer(400, b"the body is not JSON")
            return
        with self.state.lock:
            self.state.configs[url.netloc] = config
        self._answer(200, b"")

    def do_POST(self) -> None:
        self._read_body()
        self._answer(404, b"not served by the stand-in Ray head")

    do_DELETE = do_PATCH = do_POST

    def do_CONNECT(self) -> None:
        self._answer(405, b"the stand-in Ray head tunnels nothing")


def _handler(head_state: RayHeadState) -> type[BaseHTTPRequestHandler]:
    class Handler(_RayHeadHandler):
        state = head_state

    return Handler


class RayHeadStandIn:
    """The proxy server in a thread: `url` is what HTTP_PROXY is set to."""

    def __init__(self) -> None:
        self.state = RayHeadState()
        self.server = ThreadingHTTPServer((LOOPBACK, 0), _handler(self.state))
        self.server.daemon_threads = True
        self.url = f"http://{LOOPBACK}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="ray-head-stand-in", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
