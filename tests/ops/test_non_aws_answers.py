"""An AWS endpoint that does not answer as AWS (AWS_ENDPOINT_URL pointing at a web server, a captive
portal, a proxy's error page, bytes of no protocol): botocore parses an HTML page as an empty answer
(a KeyError later) or raises parser errors no caller expects. Every client of the command's session
refuses such an answer: one line naming the endpoint and the call, exit 2 (the local set-up: the
endpoint or proxy configuration), never an internal error. A real local HTTP server on 127.0.0.1."""

from __future__ import annotations

import http.server
import threading
from typing import ClassVar

import pytest

from ops.__main__ import main

COMMANDS = ["preflight", "verify", "verify-remote"]
NOT_AWS = (
    "not an AWS API answer: check AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, endpoint_url in the AWS config "
    "and HTTPS_PROXY"
)

STS_IDENTITY = (
    b'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
    b"<GetCallerIdentityResult>"
    b"<Arn>arn:aws:iam::123456789012:user/t</Arn><UserId>AIDA</UserId><Account>123456789012</Account>"
    b"</GetCallerIdentityResult><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>"
    b"</GetCallerIdentityResponse>"
)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    answers: ClassVar[list] = []  # (status, content type, body): the first for the first request, the last for the rest
    seen: ClassVar[list] = []


class _Handler(http.server.BaseHTTPRequestHandler):
    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        server = self.server
        server.seen.append(self.path)
        status, content_type, body = server.answers[min(len(server.seen), len(server.answers)) - 1]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_HEAD = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint(monkeypatch, local_aws):
    """answer(*answers) -> the URL of a server on 127.0.0.1 that answers them, AWS_ENDPOINT_URL pointing at it."""
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # a 5xx is retried otherwise: seconds of backoff
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server = _Server(("127.0.0.1", 0), _Handler)
    server.answers, server.seen = [], []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)

    def answer(*answers):
        server.answers[:] = answers
        return url

    yield answer
    server.shutdown()
    server.server_close()


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


HTML = b"<html><head><title>Sign in</title></head><body>Welcome to the guest Wi-Fi</body></html>"
BINARY = bytes(range(256)) * 16
NOT_XML, NOT_JSON = "an answer that is not XML", "an answer that is not JSON"

# (id, (status, content type, body), the problem in the line's words: STS/EC2 (XML) and EKS (JSON) may differ)
NOT_AWS_ANSWERS = [
    ("html-200", (200, "text/html; charset=utf-8", HTML), "an HTML page", "an HTML page"),
    (
        "html-403-doctype",
        (403, "text/html", b"<!DOCTYPE html><html><body>Forbidden</body></html>"),
        "an HTML page",
        "an HTML page",
    ),
    ("html-as-text-plain", (200, "text/plain", b"  <HTML><body>hi</body></HTML>"), "an HTML page", "an HTML page"),
    ("broken-html-404", (404, "text/html", b"<html><body>hello<br></body>"), "an HTML page", "an HTML page"),
    (
        "html-407-proxy",
        (407, "text/html", b"<html>Proxy Authentication Required</html>"),
        "an HTML page",
        "an HTML page",
    ),
    ("binary-200", (200, "application/octet-stream", BINARY), NOT_XML, NOT_JSON),
    ("binary-403", (403, "application/octet-stream", BINARY), NOT_XML, NOT_JSON),
    ("binary-500", (500, "application/octet-stream", BINARY), NOT_XML, NOT_JSON),
    ("plain-text", (200, "text/plain", b"hello"), NOT_XML, NOT_JSON),
    ("deep-json", (200, "application/json", b"[" * 100_000), NOT_XML, NOT_JSON),
    (
        "json-array",
        (200, "application/json", b"[1, 2]"),
        "an answer that is not XML",
        "JSON that is not an object (a list)",
    ),
    (
        "json-string",
        (200, "application/json", b'"cluster"'),
        "an answer that is not XML",
        "JSON that is not an object (a str)",
    ),
    (
        "json-of-another-api",
        (200, "application/json", b'{"status": "ok", "version": 3}'),
        "an answer that is not XML",
        "a JSON object with none of the fields of an AWS answer to DescribeCluster",
    ),
    (
        "xml-of-another-api",
        (200, "text/xml", b'<?xml version="1.0"?><rss><channel/></rss>'),
        "XML whose root is <rss> (an AWS answer to GetCallerIdentity is <GetCallerIdentityResponse>)",
        "an answer that is not JSON",
    ),
    (
        "xml-right-root-no-result",
        (200, "text/xml", b"<GetCallerIdentityResponse></GetCallerIdentityResponse>"),
        "XML without the <GetCallerIdentityResult> an AWS answer to GetCallerIdentity has",
        "an answer that is not JSON",
    ),
    (
        "xml-error-of-another-kind",
        (400, "text/xml", b"<error><message>no</message></error>"),
        "XML whose root is <error> (an AWS answer to GetCallerIdentity is <ErrorResponse>)",
        "an answer that is not JSON",
    ),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    "case_id, answer, xml_problem, json_problem", NOT_AWS_ANSWERS, ids=[case[0] for case in NOT_AWS_ANSWERS]
)
def test_an_answer_that_is_not_aws_is_one_line_and_exit_2(
    command, case_id, answer, xml_problem, json_problem, endpoint, capsys
):
    url = endpoint(answer)
    assert main([command, "--stage", "dev"]) == 2
    line = _one_line(capsys)
    call, problem = (
        ("eks DescribeCluster", json_problem) if command == "verify" else ("sts GetCallerIdentity", xml_problem)
    )
    assert line == (
        f"{command} --stage dev: the AWS endpoint {url} answered {call} with {problem} (HTTP {answer[0]}), {NOT_AWS}"
    )


def test_a_later_call_answered_by_something_else_is_refused_too(endpoint, capsys):
    """STS answers as AWS; the next call (EC2) gets STS's answer again: not one of EC2's."""
    url = endpoint((200, "text/xml", STS_IDENTITY))
    assert main(["preflight", "--stage", "dev"]) == 2
    assert _one_line(capsys) == (
        f"preflight --stage dev: the AWS endpoint {url} answered ec2 DescribeAvailabilityZones with XML whose root is "
        f"<GetCallerIdentityResponse> (an AWS answer to DescribeAvailabilityZones is "
        f"<DescribeAvailabilityZonesResponse>) (HTTP 200), {NOT_AWS}"
    )


# Answers that may be AWS's: botocore's own reading of them stands (a failed check, exit 1), never exit 3.
MAYBE_AWS = [
    ("generic-502", (502, "text/html", b"<html><body><b>Http/1.1 Bad Gateway</b></body></html>")),
    ("empty-503", (503, "text/plain", b"")),
    ("empty-object", (200, "application/json", b"{}")),
    ("empty-200", (200, "text/plain", b"")),
]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("case_id, answer", MAYBE_AWS, ids=[case[0] for case in MAYBE_AWS])
def test_other_odd_answers_are_never_an_internal_error(command, case_id, answer, endpoint, capsys):
    endpoint(answer)
    code = main([command, "--stage", "dev"])
    captured = capsys.readouterr()
    assert code in (1, 2), captured.err
    assert "Traceback" not in captured.err and "internal error" not in captured.err
    if code == 2 or command == "verify":  # verify's failures and set-up errors: one line on stderr
        assert len(captured.err.splitlines()) == 1, captured.err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_5xx_error_page_stays_a_failed_call(command, endpoint, capsys):
    """botocore's generic error (a 5xx with an empty body or its <html> page) is a call that failed: exit 1."""
    endpoint((502, "text/html", b"<html><body>Bad Gateway</body></html>"))
    assert main([command, "--stage", "dev"]) == 1
    captured = capsys.readouterr()
    assert "502" in captured.out + captured.err and "not an AWS API answer" not in captured.out + captured.err
