"""A minimal Kubernetes API client over urllib: GET/POST JSON, pod and service-proxy paths.

Only what verify needs; no kubectl, no kubeconfig. The Ray dashboard and the Serve endpoint are reached
through the API server's service proxy (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/...`), so no
port-forward is needed and nothing else must be reachable from where verify runs.

`fetch` is one HTTP request under an overall deadline (connect, headers and body together): a socket
timeout alone restarts at every byte, so a server or proxy that trickles a byte every few seconds would
hold a request forever. It follows no redirect: a 3xx comes back as the answer, and urllib's redirect
handler, which would resend the Authorization header to whatever host the Location names, is not in its
opener. It reads at most `limit` bytes of a body. `stream` is the same request, opener, deadline and cap for
an answer read as it arrives (server-sent events). No AWS SDK import here: `ops bench` uses `fetch` on
hosts without one.

`KubeApi` sends its bearer token only to an https:// endpoint with a host and no userinfo, query or
fragment, whose certificate the cluster's own CA signed (never a CA of the system's store), and turns every
answer outside 2xx (a redirect included), and every answer it cannot parse (not JSON, nested deeper than
MAX_DEPTH), into a KubeError.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import math
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class KubeError(Exception):
    """One line: which request failed and why. `kind` says what went wrong, for the fix to suggest:
    "transport" (no connection, TLS, timeout), "http" (a status outside 2xx, a redirect included, in
    `status`), "answer" (an answer that is not what a Kubernetes API server sends, or one over the size
    limit) or "endpoint" (an endpoint the token is not sent to: not https://, or with userinfo, a query or
    a fragment; refused before any connection)."""

    def __init__(self, message: str, *, kind: str = "transport", status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class DeadlineExceeded(Exception):
    """The whole request did not complete within its deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"no complete answer within {seconds:g} s (the server answers too slowly, or "
            f"something between holds the connection)"
        )


MiB = 1024 * 1024
ANSWER_LIMIT = 8 * MiB
ERROR_DETAIL_LIMIT = 600  # characters of an error status's message in a KubeError


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"


class AnswerTooLarge(Exception):
    """The body is longer than the limit; nothing past the limit was read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer exceeds {_size(limit)}")
        self.limit = limit


@dataclass(frozen=True)
class Answer:
    status: int
    reason: str
    content_type: str
    body: bytes
    location: str = ""  # the Location header, as sent (a redirect's target; never followed)

    @property
    def redirect(self) -> bool:
        return 300 <= self.status < 400


def _host(url: str) -> str:
    """host[:port] of a URL, without userinfo, path or query; "" when it names none."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return ""
    if not host:
        return ""
    host = "".join(ch for ch in host if ch.isprintable() and not ch.isspace())[:100]
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port else host


def redirected(answer: Answer, url: str) -> str:
    """One line for a 3xx answer to `url`: its status and the host its Location names (never the full URL,
    which may carry a token), and that it was not followed."""
    if not answer.location:
        return f"the server answered a redirect (HTTP {answer.status}) without a Location; not followed"
    host = _host(urllib.parse.urljoin(url, answer.location)) or "an unreadable Location"
    return f"the server answered a redirect (HTTP {answer.status}) to {host}; not followed"


def endpoint_problem(endpoint: str) -> str | None:
    """Why a bearer token must not be sent to `endpoint`, or None: it must be https:// with a host, and carry
    no userinfo, query or fragment (nor spaces or control characters)."""
    if any(ch.isspace() or not ch.isprintable() for ch in endpoint):
        return "it contains spaces or control characters"
    try:
        parts = urllib.parse.urlsplit(endpoint)
        _port = parts.port
    except ValueError:
        return "it is not a URL with a valid host and port"
    if parts.scheme != "https":
        return f"it is not https:// (scheme {parts.scheme or 'none'!r})"
    if "@" in parts.netloc:
        return "it carries userinfo (user@ before the host)"
    if not parts.hostname:
        return "it names no host"
    if "?" in endpoint:
        return "it has a query (?...)"
    if "#" in endpoint:
        return "it has a fragment (#...)"
    return None


def describe_transport(exc: BaseException) -> str:
    """One line for a network failure (no AWS types here: see errors.describe)."""
    if isinstance(exc, (DeadlineExceeded, AnswerTooLarge)):
        return str(exc)
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            return f"TLS error: {reason.reason or reason}"
        if isinstance(reason, OSError) and reason.strerror:
            return f"cannot connect: {reason.strerror}"
        return f"cannot connect: {reason}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, http.client.HTTPException):
        return f"the connection broke off: {type(exc).__name__}: {exc}".rstrip(": ")
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def _recording(connection_class: type, sockets: list) -> Callable[..., http.client.HTTPConnection]:
    """The connection class, noting each socket it connects (urllib drops the connection object's
    reference once the headers are in; the response keeps reading from the socket)."""

    class Recording(connection_class):
        def connect(self) -> None:
            super().connect()
            sockets.append(self.sock)

    return Recording


def _opener(context: ssl.SSLContext | None) -> tuple[urllib.request.OpenerDirector, Callable[[], None]]:
    """The opener of `fetch` and `stream`, and a function that shuts every socket it has connected.

    Its handlers: proxies from the environment, http:// and https:// (with `context`), each connection's
    socket recorded. No HTTPRedirectHandler and no HTTPErrorProcessor: every answer, 3xx included, is
    returned as it came, and no Location is ever followed. Shutting the sockets (the plain socket's
    shutdown, not SSLSocket's) wakes a thread blocked reading one with EOF: how a deadline ends a request."""
    sockets: list[socket.socket] = []

    class _Http(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(_recording(http.client.HTTPConnection, sockets), req)

    class _Https(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(_recording(http.client.HTTPSConnection, sockets), req, context=context)

    def shut() -> None:
        for sock in sockets:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(), _Http(), _Https(context=context)):
        opener.add_handler(handler)
    return opener, shut


def _read(response: http.client.HTTPResponse, limit: int) -> bytes:
    """The body, or AnswerTooLarge as soon as it is longer than `limit` bytes (a declared Content-Length over
    the limit is refused before reading)."""
    declared = response.headers.get("Content-Length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(limit)
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(min(64 * 1024, limit + 1 - size))
        if not chunk:
            return b"".join(parts)
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge(limit)


def _armed(context: ssl.SSLContext | None, timeout: float) -> tuple:
    """The opener, the event that says the deadline passed, and the started timer that shuts the opener's
    connections when it does (fetch's and stream's one deadline over the whole exchange)."""
    opener, shut = _opener(context)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        shut()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    return opener, expired, timer


def fetch(
    url: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: dict | None = None,
    timeout: float = 30.0,
    context: ssl.SSLContext | None = None,
    limit: int = ANSWER_LIMIT,
) -> Answer:
    """One request to an http:// or https:// URL; the answer whatever its status, a redirect included (its
    Location in `location`, never followed). Raises DeadlineExceeded when the whole exchange takes longer
    than `timeout`, AnswerTooLarge for a body over `limit` bytes, or the transport's own error (URLError,
    OSError, ...). Proxies from the environment apply as with urllib.urlopen."""
    opener, expired, timer = _armed(context, timeout)
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with opener.open(request, timeout=timeout) as response:
            answer = Answer(
                response.status,
                response.reason,
                response.headers.get_content_type(),
                _read(response, limit),
                response.headers.get("Location", ""),
            )
    except AnswerTooLarge:
        raise
    except Exception:
        if expired.is_set():
            raise DeadlineExceeded(timeout) from None
        raise
    finally:
        timer.cancel()
    if expired.is_set():  # a body cut short by the deadline can look complete to urllib
        raise DeadlineExceeded(timeout)
    return answer


class Stream:
    """An answer being read as it arrives (`stream`): `status`, `reason`, `content_type` and `location` as in
    Answer, before any of the body is read. `lines()` yields the body line by line (each with its b"\n";
    the last may lack one); `read()` is the rest of it at once (an error's body, say). Both stop with
    AnswerTooLarge once the body, counted from its first byte, is longer than the limit, and with
    DeadlineExceeded once the request's overall deadline has passed."""

    def __init__(
        self, response: http.client.HTTPResponse, *, limit: int, timeout: float, expired: threading.Event
    ) -> None:
        self.status, self.reason = response.status, response.reason
        self.content_type = response.headers.get_content_type()
        self.location = response.headers.get("Location", "")
        self.limit, self.size = limit, 0
        self._response, self._timeout, self._expired = response, timeout, expired

    @property
    def redirect(self) -> bool:
        return 300 <= self.status < 400

    def lines(self) -> Iterator[bytes]:
        while True:
            try:  # a line may be as long as what is left of the limit, one byte more to see it is over
                line = self._response.readline(self.limit + 1 - self.size)
            except Exception:
                if self._expired.is_set():
                    raise DeadlineExceeded(self._timeout) from None
                raise
            if self._expired.is_set():  # EOF from the deadline's shutdown, or a line cut short by it
                raise DeadlineExceeded(self._timeout)
            if not line:
                return
            self.size += len(line)
            if self.size > self.limit:
                raise AnswerTooLarge(self.limit)
            yield line

    def read(self) -> bytes:
        return b"".join(self.lines())

    def head(self) -> Answer:
        """The answer without its body: for `redirected()`, or a message naming the status."""
        return Answer(self.status, self.reason, self.content_type, b"", self.location)


@contextlib.contextmanager
def stream(
    url: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: dict | None = None,
    timeout: float = 300.0,
    context: ssl.SSLContext | None = None,
    limit: int = ANSWER_LIMIT,
) -> Iterator[Stream]:
    """`fetch` for an answer read as it arrives (server-sent events): one request through the same opener
    (no redirect is followed: a 3xx is yielded as it came, `redirect` true and its Location in `location`,
    for the caller to refuse; its body need not be read), as a context manager yielding a Stream once the
    headers are in. The deadline is fetch's: `timeout` covers the whole exchange, from connecting to the
    end of the `with` block, and when it passes the connection is shut and the next read raises
    DeadlineExceeded. The body is capped at `limit` bytes in all (AnswerTooLarge; a declared Content-Length
    over it is refused before reading). Transport errors are raised as fetch raises them."""
    opener, expired, timer = _armed(context, timeout)
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        try:
            response = opener.open(request, timeout=timeout)
        except Exception:
            if expired.is_set():
                raise DeadlineExceeded(timeout) from None
            raise
        with response:
            declared = response.headers.get("Content-Length", "").strip()
            if declared.isdigit() and int(declared) > limit:
                raise AnswerTooLarge(limit)
            yield Stream(response, limit=limit, timeout=timeout, expired=expired)
    finally:
        timer.cancel()


# Levels of arrays and objects an answer may nest. A Kubernetes object has a few dozen at most (a CRD's schema
# the most); CPython's json decoder recurses once per level and raises RecursionError past the recursion
# limit (1000), and whatever walks, prints (repr) or re-encodes the value recurses as deep again: bounded
# here, once, every answer can be read by any code. (Go's encoding/json, kubectl's, stops at 10000.)
MAX_DEPTH = 200


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH levels."""

    def __init__(self) -> None:
        super().__init__(f"the answer nests arrays or objects more than {MAX_DEPTH} levels deep")


def _finite(text: str) -> float:
    """A JSON number as a float: 1e400 would be inf, which compares above every count (`readyReplicas: 1e400`)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is past a float's range")
    return value


def not_json_number(name: str) -> float:
    """json.loads' parse_constant: Python's json reads NaN, Infinity and -Infinity, which RFC 8259 (and a Kubernetes
    API server, or a results file) never holds."""
    raise ValueError(f"{name} is not a number (JSON has no NaN or Infinity)")


def parse_json(body: bytes | str) -> Any:
    """The JSON value of an answer; ValueError when it is not JSON (nor UTF-8 text, or with a number no float holds:
    NaN, Infinity, 1e400), TooDeep (a ValueError) when it nests more than MAX_DEPTH levels."""
    try:
        value = json.loads(body, parse_float=_finite, parse_constant=not_json_number)
    except RecursionError:
        raise TooDeep() from None
    stack = [(value, 1)]  # by hand, not recursively: the check must not be what overflows
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    raise TooDeep()
                stack.append((child, depth + 1))
    return value


def snippet(answer: Answer, limit: int = 80) -> str:
    """The start of an answer, on one line, for an error message."""
    text = " ".join(answer.body[:400].decode(errors="replace").split())
    return json.dumps(text[:limit] + ("..." if len(text) > limit else ""))


@dataclass
class KubeApi:
    endpoint: str
    token: str
    ca_data: str | None = None  # base64 PEM, as EKS returns it
    timeout: float = 30.0

    def _context(self) -> ssl.SSLContext:
        """TLS that trusts the cluster's CA alone, as kubectl with certificate-authority-data does: never the
        system's store too, where a TLS-inspecting proxy's CA would be trusted and get the bearer token.
        ssl.create_default_context() without cafile, capath or cadata loads the system's CAs (CPython's ssl
        docs: "the system's default CA certificates" via load_default_certs()), and a CA loaded after adds to
        them; SSLContext(PROTOCOL_TLS_CLIENT) starts with none, CERT_REQUIRED and hostname checking on."""
        if not self.ca_data:
            raise KubeError(
                "the cluster has no certificate authority data: the token is sent only to a server its own CA "
                "vouches for (EKS's DescribeCluster returns it: an endpoint that is not EKS? check AWS_ENDPOINT_URL)",
                kind="endpoint",
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            context.load_verify_locations(cadata=base64.b64decode(self.ca_data).decode())
        except (ValueError, ssl.SSLError) as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
            raise KubeError(
                f"the cluster's certificate authority data is not a PEM certificate ({exc})", kind="answer"
            ) from None
        return context

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict | None = None,
        body: Any = None,
        raw: bool = False,
        timeout: float | None = None,
        limit: int = ANSWER_LIMIT,
        content_type: str = "application/json",
    ) -> Any:
        """The decoded JSON answer (the text with `raw`). Every failure is a KubeError: an endpoint the token
        is not sent to (before any connection), transport errors, a status outside 2xx (a redirect is not
        followed), an answer over `limit` bytes or not JSON, and a request that takes longer than `timeout`
        in all (not only between two bytes)."""
        url = self._url(method, path, query)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        where = f"{method} {path}"
        try:
            answer = fetch(
                url,
                method=method,
                data=data,
                headers=headers,
                timeout=timeout or self.timeout,
                context=self._context(),
                limit=limit,
            )
        except KubeError:
            raise
        except AnswerTooLarge as exc:
            raise KubeError(f"{where}: {exc}", kind="answer") from None
        except Exception as exc:  # noqa: BLE001 - any transport failure becomes one line
            raise KubeError(f"{where}: {describe_transport(exc)}") from None
        _refuse_status(where, answer, url)
        return answer.body.decode(errors="replace") if raw else _decoded(where, answer)

    def _url(self, method: str, path: str, query: dict | None) -> str:
        """The request's URL, once the endpoint is one the token may be sent to (before any connection)."""
        problem = endpoint_problem(self.endpoint)
        if problem:
            raise KubeError(
                f"{method} {path}: the cluster endpoint is refused, {problem}: the token is sent only to "
                f"an https:// URL with no userinfo, query or fragment",
                kind="endpoint",
            )
        url = self.endpoint.rstrip("/") + path
        return url + "?" + urllib.parse.urlencode(query) if query else url

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def service_path(self, namespace: str, service: str, port: str, path: str) -> str:
        return f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}"


def unexpected(request: str, exc: BaseException) -> KubeError:
    """A JSON answer of the wrong shape (a field missing, a list where an object belongs)."""
    what = f"no field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
    return KubeError(f"{request}: unexpected answer ({what}): not what a Kubernetes API server sends", kind="answer")


def _refuse_status(where: str, answer: Answer, url: str) -> None:
    """A KubeError for any answer but a 2xx one: an error status (with its Status message), a redirect (never
    followed), any other status."""
    if answer.status >= 400:
        # The Status object's message, read from the whole body (a cut body is not JSON), then shortened.
        detail: Any = answer.body.decode(errors="replace")
        try:
            detail = parse_json(answer.body).get("message", detail)
        except (ValueError, AttributeError):
            pass
        detail = " ".join(str(detail).split())
        detail = detail if len(detail) <= ERROR_DETAIL_LIMIT else detail[:ERROR_DETAIL_LIMIT] + "..."
        raise KubeError(f"{where}: HTTP {answer.status} {detail}".rstrip(), kind="http", status=answer.status)
    if answer.redirect:
        raise KubeError(f"{where}: {redirected(answer, url)}", kind="http", status=answer.status)
    if not 200 <= answer.status < 300:
        raise KubeError(
            f"{where}: HTTP {answer.status} {answer.reason}: not a success".rstrip(), kind="http", status=answer.status
        )


def _decoded(where: str, answer: Answer) -> Any:
    """The JSON of a success; a KubeError when it is not JSON, or nested deeper than MAX_DEPTH."""
    try:
        return parse_json(answer.body)
    except TooDeep as exc:
        raise KubeError(f"{where}: {exc}: not what a Kubernetes API server sends", kind="answer") from None
    except ValueError:
        raise KubeError(
            f"{where}: the answer is not JSON ({answer.content_type or 'no content type'}: "
            f"{snippet(answer)}): not what a Kubernetes API server sends",
            kind="answer",
        ) from None
