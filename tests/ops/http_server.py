"""A local HTTP(S) server on 127.0.0.1 whose every answer a test chooses, counting its connections: for the
tests of ops/'s HTTP clients (tests/ops/test_kube_http.py, tests/serving_lab/rehearse/test_rehearse_http.py)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler

from .fake_cluster import CountingServer, tls


class Server(CountingServer):
    """A CountingServer whose every answer is `respond(method, path)`: (status, headers, body), the body bytes
    or an iterable of chunks (sent chunked). `requests` holds (method, path, Authorization) per request, `headers`
    each request's headers, their names in lower case."""

    def __init__(self, respond, *, https: bool = False) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.headers: list[dict[str, str]] = []
        self.stop = threading.Event()
        self.respond = respond
        super().__init__(_Handler, tls=tls() if https else None)

    def __exit__(self, *exc) -> None:
        self.stop.set()
        super().__exit__(*exc)

    @property
    def port(self) -> int:
        return self.server_address[1]


class _Handler(BaseHTTPRequestHandler):
    """Answers each request with its Server's `respond`."""

    protocol_version = "HTTP/1.1"
    server: Server

    def _serve(self) -> None:
        self.server.requests.append((self.command, self.path, self.headers.get("Authorization", "")))
        self.server.headers.append({name.lower(): value for name, value in self.headers.items()})
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, headers, body = self.server.respond(self.command, self.path)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        if isinstance(body, bytes):
            self._send_whole(headers, body)
        else:
            self._send_chunked(body)

    def _send_whole(self, headers: dict, body: bytes) -> None:
        declared = "Content-Length" in headers
        if not declared:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if declared and int(headers["Content-Length"]) > len(body):
            self.server.stop.wait(30)  # a body shorter than declared: hold the connection open

    def _send_chunked(self, body) -> None:
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in body:
                if self.server.stop.is_set():
                    return
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()  # each chunk as it is made, as vLLM streams
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return

    do_GET = do_POST = do_PUT = _serve

    def log_message(self, *args) -> None:
        pass
