"""Turn any AWS or network failure into one line: what failed and why, never a traceback."""
from __future__ import annotations

import socket
import ssl
import urllib.error

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError


def describe(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code", "Error")
        message = error.get("Message", "")
        operation = getattr(exc, "operation_name", "")
        return f"{operation}: {code}: {message}".strip(": ")
    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials found"
    if isinstance(exc, NoRegionError):
        return "no AWS region"
    if isinstance(exc, BotoCoreError):
        return str(exc)
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return f"cannot connect: {exc.reason}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code", "")
    return ""


AWS_ERRORS = (ClientError, BotoCoreError)
NETWORK_ERRORS = (urllib.error.URLError, OSError, ssl.SSLError, TimeoutError)
