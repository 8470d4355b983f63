"""boto3 clients of one session and region, made once each; tests put moto's or botocore Stubbers in
`overrides`. And what a command does to a session before its first client: resolve the credentials
within a deadline (resolve_credentials) and refuse answers that are not AWS's (guard_answers)."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError

from .errors import SetupError, aws_fix, describe, setup_problem


@dataclass
class Clients:
    session: boto3.session.Session
    region: str
    overrides: dict[str, Any] = field(default_factory=dict)
    _made: dict[str, Any] = field(default_factory=dict)

    def __call__(self, service: str):
        if service in self.overrides:
            return self.overrides[service]
        if service not in self._made:
            self._made[service] = self.session.client(service, region_name=self.region)
        return self._made[service]


# --- The session's credentials, resolved once within a deadline ------------------------------------------

# How long the first resolution of a session's credentials may take (StageCommand.run). botocore runs a
# profile's credential_process with no timeout at all (SSO and instance metadata lookups have their own), so
# a process that never answers (one waiting for input, a helper stuck on a lock) would hang every command.
CREDENTIAL_DEADLINE_S = 60.0
# After the deadline: how long a credential process gets to end after SIGTERM before SIGKILL.
_TERM_GRACE_S = 1.0


class CredentialDeadline(SetupError):
    """The session's credentials did not resolve within CREDENTIAL_DEADLINE_S (exit 2)."""


class CredentialsUnavailable(SetupError):
    """Resolving the session's credentials failed: the profile's credential_process, SSO login or other
    source did not give credentials (exit 2: the local set-up, before any AWS call)."""


def resolve_credentials(session: boto3.session.Session, deadline: float | None = None):
    """session.get_credentials() (botocore keeps the result for every client of the session made after),
    within `deadline` seconds (default CREDENTIAL_DEADLINE_S). None when no source has credentials (the
    checks report that). Raises CredentialDeadline on expiry, CredentialsUnavailable when a source fails,
    and the set-up errors of errors.setup_problem (a missing profile, a config file that does not parse)
    as botocore raised them.

    The resolution runs in a daemon thread; on expiry the processes that thread started (the
    credential_process, found as children of this process that appeared meanwhile: Linux /proc) get
    SIGTERM, then SIGKILL, and botocore's wait in the thread reaps them. Where /proc is missing (macOS),
    or for processes *they* started, nothing is killed: they keep running, detached, until they end;
    the command still ends at the deadline (the thread is a daemon and holds no lock the exit needs)."""
    deadline = CREDENTIAL_DEADLINE_S if deadline is None else deadline
    profile = getattr(session, "profile_name", None) or "default"
    before = _children()
    outcome: dict[str, Any] = {}

    def resolve() -> None:
        try:
            outcome["credentials"] = session.get_credentials()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = exc

    worker = threading.Thread(target=resolve, name="aws-credentials", daemon=True)
    worker.start()
    worker.join(deadline)
    if worker.is_alive():
        killed = _end(_children() - before)
        worker.join(_TERM_GRACE_S)
        what = _process_named(session, profile) or f"resolving the AWS credentials of profile {profile!r}"
        ended = f" (process {', '.join(map(str, sorted(killed)))} ended)" if killed else ""
        raise CredentialDeadline(
            f"{what} did not answer within {deadline:g} s{ended}: run it yourself to see what "
            f"it waits for (a prompt, a login, a lock), fix it or use another profile"
        )
    error = outcome.get("error")
    if error is None:
        return outcome.get("credentials")
    if setup_problem(error) or not isinstance(error, Exception):
        raise error
    process = _process_named(session, profile)
    source = process or f"the AWS credentials of profile {profile!r}"
    detail = describe(error) if isinstance(error, BotoCoreError) else f"{type(error).__name__}: {error}"
    fix = (
        "run it yourself to see why, fix it or use another profile"
        if process
        else aws_fix(error, "check the profile with `aws configure list`, or use another profile")
    )
    raise CredentialsUnavailable(f"{source} failed: {detail} -> {fix}") from error


def _process_named(session: boto3.session.Session, profile: str) -> str:
    """ "the AWS credential_process of profile 'P'" when the profile, or a source_profile it assumes a role
    from, has one; "" when none does."""
    try:
        profiles = session._session.full_config.get("profiles", {})  # botocore's parsed config files
    except Exception:  # noqa: BLE001 - only the wording of a message depends on it
        return ""
    seen: list[str] = []
    name = profile
    while isinstance(name, str) and name not in seen and isinstance(profiles.get(name), dict):
        seen.append(name)
        if profiles[name].get("credential_process"):
            via = f" (the source_profile of {profile!r})" if name != profile else ""
            return f"the AWS credential_process of profile {name!r}{via}"
        name = profiles[name].get("source_profile")
    return ""


def _children() -> set[int]:
    """The processes whose parent is this one (Linux /proc; elsewhere none are known)."""
    me, found = os.getpid(), set[int]()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(me).encode():
            found.add(int(entry))
    return found


def _end(pids: set[int]) -> set[int]:
    """SIGTERM, then (after _TERM_GRACE_S) SIGKILL to those still there: the ones signalled."""
    signalled = set()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            signalled.add(pid)
        except OSError:
            pass
    end = time.monotonic() + _TERM_GRACE_S
    while signalled & _children() and time.monotonic() < end:
        time.sleep(0.05)
    for pid in signalled & _children():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return signalled


# --- Answers that are not AWS's -----------------------------------------------------------------------


class NotAwsAnswer(SetupError):
    """An AWS API call was answered by something that is not AWS (an HTML page, a proxy's or another
    server's answer, bytes of no AWS protocol): the endpoint or proxy set-up is wrong (exit 2)."""


# The start of an XML document: its declaration and comments, then the root element's name.
_XML_ROOT = re.compile(rb"\A\s*(?:<\?xml[^>]*\?>\s*)?(?:<!--.*?-->\s*)*<([A-Za-z_][\w.:-]*)", re.DOTALL)


def guard_answers(session: boto3.session.Session) -> None:
    """Make the clients the session makes from now on refuse an answer that is not AWS's with one
    NotAwsAnswer, before botocore parses it: an HTML page; for the query protocols (STS, EC2, ...) an
    answer that is not XML with an ...Response root; for the JSON protocols one that is not a JSON object;
    and whatever botocore's parser cannot read (ResponseParserError, UnicodeDecodeError, ...). Without it
    an HTML page parses as an empty answer (a KeyError in the code that reads it) or raises errors no
    caller expects. A 5xx answer that is empty or botocore's generic HTML error page is left to botocore
    (a ClientError "502", retried)."""
    core = getattr(session, "_session", None)  # the botocore session: its parser factory and event hooks
    if core is None:  # not a boto3 Session (a test's stand-in): nothing to guard
        return
    factory = core.get_component("response_parser_factory")
    if isinstance(factory, _GuardedParsers):
        return
    guarded = _GuardedParsers(factory)
    core.register_component("response_parser_factory", guarded)
    core.register("before-send", guarded.remember)


class _GuardedParsers:
    """botocore's ResponseParserFactory, whose parsers check the answer first (and name the request)."""

    def __init__(self, factory) -> None:
        self._factory = factory
        self._last = threading.local()  # the request being answered, per thread: (service, URL)

    def remember(self, request, event_name: str = "", **_) -> None:
        parts = urllib.parse.urlsplit(getattr(request, "url", "") or "")
        self._last.request = (
            event_name.split(".")[1] if event_name.count(".") >= 2 else "?",
            f"{parts.scheme}://{parts.netloc}" if parts.netloc else "?",
        )

    def set_parser_defaults(self, **kwargs) -> None:
        self._factory.set_parser_defaults(**kwargs)

    def create_parser(self, protocol_name: str):
        return _GuardedParser(self._factory.create_parser(protocol_name), protocol_name, self)

    def request(self) -> tuple[str, str]:
        return getattr(self._last, "request", ("?", "?"))


class _GuardedParser:
    def __init__(self, parser, protocol: str, parsers: _GuardedParsers) -> None:
        self._parser, self._protocol, self._parsers = parser, protocol, parsers

    def __getattr__(self, name: str):
        return getattr(self._parser, name)

    def parse(self, response: dict, shape):
        problem = _answer_problem(self._protocol, response, shape)
        if not problem:
            try:
                return self._parser.parse(response, shape)
            except Exception as exc:  # noqa: BLE001 - botocore's parser failing on the answer's bytes
                problem = (
                    f"an answer botocore cannot parse ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
                    if str(exc)
                    else f"an answer botocore cannot parse ({type(exc).__name__})"
                )
        service, url = self._parsers.request()
        operation = (response.get("context") or {}).get("operation_name", "?")
        raise NotAwsAnswer(
            f"the AWS endpoint {url} answered {service} {operation} with {problem} (HTTP "
            f"{response.get('status_code', '?')}), not an AWS API answer: check AWS_ENDPOINT_URL, "
            f"AWS_ENDPOINT_URL_<SERVICE>, endpoint_url in the AWS config and HTTPS_PROXY"
        )


def _answer_problem(protocol: str, response: dict, shape) -> str:
    """What makes the answer not AWS's, in words; "" when it may be (the parser has the last word)."""
    body = response.get("body")
    if not isinstance(body, (bytes, bytearray)):  # a streamed body (S3 objects, event streams): not read here
        return ""
    status = response.get("status_code") or 0
    text = bytes(body).strip()
    if status >= 500 and (not text or text.startswith(b"<html>")):
        return ""  # botocore's generic error: a failed call (retried), not a wrong endpoint
    content_type = str((response.get("headers") or {}).get("content-type", "")).lower()
    if "text/html" in content_type or text[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "an HTML page"
    operation = (response.get("context") or {}).get("operation_name", "")
    if protocol in ("query", "ec2"):
        return _xml_problem(text, status, operation, shape)
    if protocol in ("json", "rest-json") and text:
        return _json_problem(text, status, operation, shape)
    return ""


def _xml_problem(text: bytes, status: int, operation: str, shape) -> str:
    """What makes a query or EC2 protocol answer not AWS's; "" when it may be."""
    root = _XML_ROOT.match(text)
    if not root:
        return "an answer that is not XML"
    name = root.group(1).decode("ascii", "replace").rsplit(":", 1)[-1]
    # The query protocols answer <ActionResponse> (with its <ActionResult> when the action returns
    # anything), and errors as <ErrorResponse> (EC2: <Response>).
    expected = {"ErrorResponse", "Response"} if status >= 300 else {f"{operation}Response"}
    if name not in expected:
        return f"XML whose root is <{name[:40]}> (an AWS answer to {operation} is <{min(expected)}>)"
    wrapper = (getattr(shape, "serialization", None) or {}).get("resultWrapper") if status < 300 else None
    if wrapper and not re.search(rb"<(?:\w+:)?" + re.escape(wrapper.encode()) + rb"[\s/>]", text):
        return f"XML without the <{wrapper}> an AWS answer to {operation} has"
    return ""


def _json_problem(text: bytes, status: int, operation: str, shape) -> str:
    """What makes a non-empty JSON or REST-JSON protocol answer not AWS's; "" when it may be."""
    if shape is not None and (getattr(shape, "serialization", None) or {}).get("payload"):
        return ""  # the body is the payload member itself (a blob or a document)
    try:
        answer = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return "an answer that is not JSON"
    if not isinstance(answer, dict):
        return f"JSON that is not an object (a {type(answer).__name__})"
    members = {
        name
        for key, member in (getattr(shape, "members", None) or {}).items()
        if not member.serialization.get("location")  # a header or the status, not a body field
        for name in (key, member.serialization.get("name", key))
    }
    if status < 300 and answer and members and not members & set(answer):
        return f"a JSON object with none of the fields of an AWS answer to {operation}"
    return ""
