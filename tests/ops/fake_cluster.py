"""A local fake of what verify talks to: the Kubernetes API (nodes, the KubeRay operator deployment, the
RayService), and, through the API server's service proxy, the Ray dashboard's State API (nodes, log
listing, log files) and the OpenAI endpoint of the Serve service. A real HTTPS server on 127.0.0.1, with
a certificate signed by a CA of its own (`tls()`); `FakeCluster.ca_data` is that CA as EKS returns it
(base64 PEM), for `KubeApi(ca_data=)`.

Paths and payload shapes, and where they were checked:
- `/version`, `/api/v1/nodes?labelSelector=`, `/apis/apps/v1/namespaces/NS/deployments/NAME` and the
  service proxy `/api/v1/namespaces/NS/services/NAME:PORT/proxy/PATH`: Kubernetes API reference (v1.35);
  the node and deployment objects carry only the fields verify reads (conditions, allocatable,
  availableReplicas), with Kubernetes' own names.
- `/apis/ray.io/v1/namespaces/NS/rayservices/NAME`: the RayService's `status` is validated in the tests
  against KubeRay 1.6.2's CRD (the chart's crds/ in the Go module cache: tests/reference_data.py), strictly.
- `/api/v0/nodes`, `/api/v0/logs`, `/api/v0/logs/file`: Ray 2.58's dashboard, `dashboard/modules/state/
  state_head.py` (routes and query parameters), `dashboard/routes.py::rest_response` (the
  `{"result", "msg", "data"}` envelope), `util/state/common.py` (`ListApiResponse`, `NodeState`), and
  `dashboard/modules/log/log_manager.py::_categorize_log_files` (`worker_out` / `worker_err` groups).
- `/v1/models`, `/v1/chat/completions`: the OpenAI API as Ray Serve LLM serves it (`object: list`,
  `data[].id`; `choices[0].message.content`).
- `/api/v1/namespaces/NS/pods?labelSelector=ray.io/node-type=worker` and the pod proxy
  `/api/v1/namespaces/NS/pods/NAME:9090/proxy/metrics`: the GPU workers (a PodList with each pod's name, phase
  and podIP) and NIXL's Prometheus exporter on each (tests/clients/nixl_exporter.py's format); each chat
  completion adds `Scenario.kv_moves[ip]` (bytes, microseconds) to that worker's counters, as the decode
  worker's agent counts a PD request's KV read.

`Scenario.raw` replaces the answer of a path with any status, content type, bytes and headers (an HTML page
from a proxy, JSON of the wrong shape, a redirect), for the tests of answers no Kubernetes API server sends. `SlowServer`
answers every request by trickling its bytes (headers or body), for the per-request deadline.
`CountingServer` is http.server with TLS or without, counting the connections it accepts.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from ..clients.nixl_exporter import exporter_text

FIXTURES = Path(__file__).parent / "fixtures"
TOKEN = "k8s-aws-v1.test-token"
HEAD = "/api/v1/namespaces/inference/services/ray-llm-head-svc:dashboard/proxy"
SERVE = "/api/v1/namespaces/inference/services/ray-llm-serve-svc:serve/proxy"


def node(name: str, *, ready: bool = True, gpus: str = "1", efa: str = "1") -> dict:
    allocatable = {"cpu": "31850m", "memory": "127Gi", "nvidia.com/gpu": gpus}
    if efa is not None:
        allocatable["vpc.amazonaws.com/efa"] = efa
    return {
        "metadata": {"name": name, "labels": {"role": "gpu-worker"}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "allocatable": allocatable,
        },
    }


def ray_service_status(app_status: str = "RUNNING", ready: bool = True, message: str = "") -> dict:
    return {
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                # KubeRay 1.6.2's reasons (apis/ray/v1/rayservice_types.go RayServiceConditionReason)
                "reason": "NonZeroServeEndpoints" if ready else "ZeroServeEndpoints",
                "lastTransitionTime": "2026-11-30T04:00:00Z",
                "message": "",
            }
        ],
        "serviceStatus": "Running" if ready else "",
        "activeServiceStatus": {
            "rayClusterName": "ray-llm-x7k2p",
            "applicationStatuses": {"llm": {"status": app_status, "message": message, "serveDeploymentStatuses": {}}},
        },
    }


@dataclass(frozen=True)
class Tls:
    cert: Path  # the server's certificate (SAN IP:127.0.0.1, DNS:localhost), signed by the CA
    key: Path
    ca_pem: str

    @property
    def ca_data(self) -> str:
        """The CA as EKS's DescribeCluster returns it: base64 of the PEM."""
        return base64.b64encode(self.ca_pem.encode()).decode()

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


@functools.cache
def tls() -> Tls:
    """A CA and a server certificate for 127.0.0.1, made once per test run (with the `cryptography` package,
    else the openssl command) in a temporary folder removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix="fake-cluster-tls-"))
    atexit.register(shutil.rmtree, folder, True)
    try:
        import cryptography  # noqa: F401 - a probe: is the package installed?
    except ImportError:
        _openssl_certificates(folder)
    else:
        _cryptography_certificates(folder)
    return Tls(folder / "server.pem", folder / "server.key", (folder / "ca.pem").read_text())


def _cryptography_certificates(folder: Path) -> None:
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-cluster-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(server.public_bytes(pem))
    (folder / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _openssl_certificates(folder: Path) -> None:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    (folder / "server.ext").write_text(
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n"
        "basicConstraints = critical, CA:FALSE\n"
        "extendedKeyUsage = serverAuth\n"
        "authorityKeyIdentifier = keyid\n"
    )
    openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=fake-cluster-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE,pathlen:0",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=kubernetes",
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "server.ext",
    )


class CountingServer(ThreadingHTTPServer):
    """http.server on 127.0.0.1 that counts the connections it accepts (`connections`, before any TLS
    handshake or request line) and, with `tls`, speaks HTTPS: the handshake runs in the connection's own
    thread, so a client that never completes one holds up no other."""

    daemon_threads = True

    def __init__(self, handler: type, *, tls: Tls | None = None) -> None:
        self.connections = 0
        self.context = tls.server_context() if tls else None
        super().__init__(("127.0.0.1", 0), handler)

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.context else 'http'}://127.0.0.1:{self.server_address[1]}"

    def get_request(self):
        request = super().get_request()
        self.connections += 1
        return request

    def finish_request(self, request, client_address) -> None:
        # A client may hang up before the whole answer is written (it read what it needed, or gave up): not the
        # server's error. socketserver would print its traceback to stderr, into the output a test checks.
        try:
            if self.context is None:
                return super().finish_request(request, client_address)
            with self.context.wrap_socket(request, server_side=True) as wrapped:
                super().finish_request(wrapped, client_address)
        except OSError:  # ssl.SSLError and the connection errors among them
            return None
        return None

    def __enter__(self) -> Self:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


@dataclass
class Scenario:
    nodes: list = field(default_factory=lambda: [node("ip-10-0-40-17"), node("ip-10-0-41-9")])
    operator_available: int = 1
    statuses: list = field(default_factory=lambda: [ray_service_status()])  # one per poll, last repeats
    worker_logs: dict = field(default_factory=lambda: {"10.0.40.17": "efa.log", "10.0.41.9": "efa.log"})
    models: list = field(default_factory=lambda: ["qwen3.5-9b"])
    completion: str = "It splits prompt processing and token generation across GPUs."
    requests: list = field(default_factory=list)
    polls: int = 0
    raw: dict = field(default_factory=dict)  # path -> (status, content type, body bytes[, more headers])
    # per chat completion, what each worker's NIXL agent receives: ip -> (bytes, microseconds); the decode
    # worker reads 1/6 of the measured PD round (672,399,360 bytes for 6 requests) in 80 ms: 11.2 Gbps
    kv_moves: dict = field(default_factory=lambda: {"10.0.41.9": (112_066_560, 80_000)})
    kv_counters: dict = field(default_factory=dict)  # ip -> [bytes, requests, microseconds] so far
    # scrapes of an exporter after a completion that still show the counters from before it, as NIXL's exporter
    # does until its next export (every 100 ms: ai-dynamo/nixl src/core/telemetry/telemetry.cpp)
    export_lag: int = 0
    kv_shown: dict = field(default_factory=dict)  # ip -> [bytes, requests, microseconds] the exporter shows
    lag_left: dict = field(default_factory=dict)  # ip -> scrapes left before it shows kv_counters


def worker_pod_name(ip: str) -> str:
    return f"ray-llm-x7k2p-gpu-worker-{ip.replace('.', '-')}"


def exporter_path(ip: str) -> str:
    return f"/api/v1/namespaces/inference/pods/{worker_pod_name(ip)}:9090/proxy/metrics"


class FakeCluster:
    """The fake API server over HTTPS; `api()` is a KubeApi that trusts its CA."""

    def __init__(self, scenario: Scenario | None = None) -> None:
        self.scenario = scenario or Scenario()
        self.server = CountingServer(_handler(self), tls=tls())

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    @property
    def ca_data(self) -> str:
        return tls().ca_data

    def api(self, token: str = TOKEN, **kwargs: Any):
        from clients.kube import KubeApi

        return KubeApi(self.endpoint, token, ca_data=self.ca_data, **kwargs)

    def __enter__(self) -> Self:
        self.server.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.server.__exit__(*exc)

    # --- routing -------------------------------------------------------------------------------------
    def answer(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any]:
        self.scenario.requests.append((method, path))
        answered = (
            self._kube_api(path, query)
            or self._workers(path, query)
            or self._ray_dashboard(path, query)
            or self._openai(method, path, body)
        )
        return answered or (
            404,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "NotFound",
                "message": f"the server could not find the requested resource ({path})",
                "code": 404,
            },
        )

    def _kube_api(self, path: str, query: dict) -> tuple[int, Any] | None:
        s = self.scenario
        if path == "/version":
            return 200, {"major": "1", "minor": "35", "gitVersion": "v1.35.0-eks-fake"}
        if path == "/api/v1/nodes":
            assert query.get("labelSelector") == ["role=gpu-worker"], query
            return 200, {"kind": "NodeList", "apiVersion": "v1", "items": s.nodes}
        if path == "/apis/apps/v1/namespaces/kuberay-system/deployments/kuberay-operator":
            return 200, {"kind": "Deployment", "status": {"replicas": 1, "availableReplicas": s.operator_available}}
        if path == "/apis/ray.io/v1/namespaces/inference/rayservices/ray-llm":
            status = s.statuses[min(s.polls, len(s.statuses) - 1)]
            s.polls += 1
            return 200, {
                "apiVersion": "ray.io/v1",
                "kind": "RayService",
                "metadata": {"name": "ray-llm", "namespace": "inference"},
                "status": status,
            }
        return None

    def _workers(self, path: str, query: dict) -> tuple[int, Any] | None:
        ips = list(self.scenario.worker_logs)
        if path == "/api/v1/namespaces/inference/pods":
            assert query.get("labelSelector") == ["ray.io/node-type=worker"], query
            items = [
                {"metadata": {"name": worker_pod_name(ip)}, "status": {"phase": "Running", "podIP": ip}} for ip in ips
            ]
            return 200, {"kind": "PodList", "apiVersion": "v1", "items": items}
        for ip in ips:
            if path == exporter_path(ip):
                moved, requests, time_us = self._exported(ip)
                return 200, exporter_text(moved, requests, time_us, host=worker_pod_name(ip))
        return None

    def _exported(self, ip: str) -> list[int]:
        scenario = self.scenario
        if scenario.lag_left.get(ip, 0) > 0:
            scenario.lag_left[ip] -= 1
        else:
            scenario.kv_shown[ip] = list(scenario.kv_counters.get(ip, [0, 0, 0]))
        return scenario.kv_shown.get(ip, [0, 0, 0])

    def _count_kv(self) -> None:
        for ip, (moved, time_us) in self.scenario.kv_moves.items():
            counters = self.scenario.kv_counters.setdefault(ip, [0, 0, 0])
            counters[0] += moved
            counters[1] += 1 if moved else 0
            counters[2] += time_us
            self.scenario.lag_left[ip] = self.scenario.export_lag

    def _ray_dashboard(self, path: str, query: dict) -> tuple[int, Any] | None:
        if path == f"{HEAD}/api/v0/nodes":
            nodes = self._ray_nodes()
            return 200, _envelope(
                {
                    "total": len(nodes),
                    "num_after_truncation": len(nodes),
                    "num_filtered": len(nodes),
                    "result": nodes,
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            )
        if path == f"{HEAD}/api/v0/logs":
            ip = query["node_id"][0].removeprefix("node-")
            assert query.get("glob") == ["worker-*"]
            return 200, _envelope(
                {"worker_err": [f"worker-{ip}-01000000-1234.err"], "worker_out": [f"worker-{ip}-01000000-1234.out"]}
            )
        if path == f"{HEAD}/api/v0/logs/file":
            ip = query["node_id"][0].removeprefix("node-")
            if query["filename"][0].endswith(".err"):
                return 200, (FIXTURES / self.scenario.worker_logs[ip]).read_text()
            return 200, "INFO replica started\n"
        return None

    def _ray_nodes(self) -> list[dict]:
        head = {
            "node_id": "head0",
            "node_ip": "10.0.8.4",
            "is_head_node": True,
            "state": "ALIVE",
            "node_name": "10.0.8.4",
            "resources_total": {"CPU": 3.0},
            "labels": {},
        }
        return [head] + [
            {
                "node_id": f"node-{ip}",
                "node_ip": ip,
                "is_head_node": False,
                "state": "ALIVE",
                "node_name": ip,
                "resources_total": {"CPU": 16.0, "GPU": 1.0},
                "labels": {},
            }
            for ip in self.scenario.worker_logs
        ]

    def _openai(self, method: str, path: str, body: Any) -> tuple[int, Any] | None:
        s = self.scenario
        if path == f"{SERVE}/v1/models":
            return 200, {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "owned_by": "organization", "created": 1764476000} for m in s.models
                ],
            }
        if path == f"{SERVE}/v1/chat/completions" and method == "POST":
            assert body["model"] in s.models and body["messages"][0]["role"] == "user"
            self._count_kv()
            return 200, {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1764476400,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": s.completion}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32},
            }
        return None


def _envelope(result: Any) -> dict:
    return {"result": True, "msg": "", "data": {"result": result}}


def _handler(cluster: FakeCluster):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if parsed.path in cluster.scenario.raw:  # before the token check: a proxy's page checks none
                cluster.scenario.requests.append((method, parsed.path))
                status, content_type, data, *more = cluster.scenario.raw[parsed.path]
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in (more[0] if more else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(
                    401,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "message": "Unauthorized",
                        "reason": "Unauthorized",
                        "code": 401,
                    },
                )
            status, payload = cluster.answer(method, parsed.path, urllib.parse.parse_qs(parsed.query), body)
            self._send(status, payload)

        def _send(self, status: int, payload: Any) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, *args) -> None:
            pass

    return Handler


class SlowServer:
    """A server that sends a byte every `interval` seconds, forever: its status line and headers
    (`part="headers"`) or, after complete headers, its body (`part="body"`). No socket timeout ever
    fires against it; only an overall deadline per request stops a client. With `https`, over TLS with the
    certificate of `tls()` (its CA in `ca_data`)."""

    def __init__(self, part: str = "body", interval: float = 0.2, *, https: bool = False) -> None:
        self.part, self.interval = part, interval
        self.context = tls().server_context() if https else None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.context else 'http'}://127.0.0.1:{self.port}"

    @property
    def ca_data(self) -> str:
        return tls().ca_data

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._trickle, args=(connection,), daemon=True).start()

    def _trickle(self, connection: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        if self.context is not None:
            try:
                connection = self.context.wrap_socket(connection, server_side=True)
            except (ssl.SSLError, OSError):
                connection.close()
                return
        with connection:
            try:
                connection.recv(65536)
                if self.part == "body":
                    connection.sendall(head)
                    chunks = iter(lambda: b" ", None)
                else:
                    chunks = (head[i : i + 1] for i in range(len(head)))
                for chunk in chunks:
                    if self.stopping.wait(self.interval):
                        return
                    connection.sendall(chunk)
            except OSError:
                return
