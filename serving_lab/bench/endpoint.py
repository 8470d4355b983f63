"""Reaching a stage's OpenAI endpoint from this machine, and the checks made before a run.

The Serve endpoint is a ClusterIP service (`<service_name>-serve-svc`, port 8000) in the serving
namespace: not exposed outside the cluster on purpose. `bench --stage` opens `kubectl port-forward` to
it (the kubeconfig from the stage's `aws eks update-kubeconfig` output) unless `--url` names an
endpoint the caller reaches already (an ingress, or a run inside the VPC).

Before the calibration and the first aiperf run (a minute or more), `check_models` asks the endpoint
for GET /v1/models and looks for the model, and `check_tokenizer` loads the tokenizer with aiperf's own
Python (its transformers and tokenizers, as aiperf will): a wrong URL, a model that is not served or a
tokenizer that cannot be loaded fails in seconds, with its cause.
"""

from __future__ import annotations

import os
import queue
import re
import socket
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clients.kube import AnswerTooLarge, describe_transport, fetch, parse_json, redirected, snippet
from config.topology import SERVE_PORT

from .aiperf import BenchError, client_python

_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")


@contextmanager
def port_forward(
    namespace: str, service: str, *, kubectl: str = "kubectl", remote_port: int = SERVE_PORT, timeout: float = 30.0
) -> Iterator[str]:
    """Yield http://127.0.0.1:<local port> forwarded to the service; stop kubectl on exit."""
    argv = [
        kubectl,
        "--namespace",
        namespace,
        "port-forward",
        f"service/{service}",
        f":{remote_port}",
        "--address",
        "127.0.0.1",
    ]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise BenchError(f"cannot run {kubectl}: {exc} (install kubectl, or pass --url)") from None
    try:
        port = _forwarded_port(proc, _pumped(proc), f"{namespace}/{service}", timeout)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


def _pumped(proc: subprocess.Popen) -> queue.Queue[tuple[str, str | None]]:
    """kubectl's stdout and stderr lines, each stream ending with None (closed), read by threads."""
    lines: queue.Queue[tuple[str, str | None]] = queue.Queue()

    def pump(stream, name):
        for line in stream:
            lines.put((name, line.rstrip()))
        lines.put((name, None))  # the stream closed

    for stream, name in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, name), daemon=True).start()
    return lines


def _forwarded_port(
    proc: subprocess.Popen, lines: queue.Queue[tuple[str, str | None]], target: str, timeout: float
) -> int:
    """The local port of kubectl's "Forwarding from" line; its last error line if both streams close first."""
    errors: list[str] = []
    closed = 0
    while True:
        try:
            _, line = lines.get(timeout=timeout)
        except queue.Empty:
            raise BenchError(f"kubectl port-forward to {target} gave no port within {timeout:.0f} s") from None
        if line is None:
            closed += 1
            if closed == 2:
                proc.wait(5)
                detail = errors[-1] if errors else f"exit {proc.returncode}"
                raise BenchError(f"kubectl port-forward to {target} failed: {detail} ({_forward_fix(detail)})")
            continue
        match = _FORWARDING.search(line)
        if match:
            return int(match.group(1))
        if line:
            errors.append(line)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()


def _forward_fix(detail: str) -> str:
    """The fix for a failed port-forward, by kubectl's message."""
    if "NotFound" in detail or "not found" in detail:
        return "deploy the stage's serving stack, or check serving.namespace and serving.service_name"
    if "forbidden" in detail.lower():
        return "the kubeconfig's identity may not port-forward: use a cluster admin (cluster.admin_principal_arns)"
    return "run the stage's update-kubeconfig command (its cluster stack output), or pass --url"


MODELS_TIMEOUT = 15.0


def check_models(url: str, model: str, *, timeout: float = MODELS_TIMEOUT) -> list[str]:
    """GET <url>/v1/models within `timeout` seconds in all; the served ids, or a BenchError naming the cause
    and the fix when the endpoint is unreachable, answers something else (a redirect, which is not followed,
    or a body over kube.fetch's limit), or does not serve `model`."""
    target = url.rstrip("/") + "/v1/models"
    try:
        answer = fetch(target, headers={"Accept": "application/json"}, timeout=timeout)
    except AnswerTooLarge as exc:
        raise BenchError(
            f"endpoint {url}: GET /v1/models: {exc} (is {url} the Serve endpoint, port {SERVE_PORT}?)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any transport failure becomes one line
        raise BenchError(
            f"endpoint {url} is not reachable: GET /v1/models: {describe_transport(exc)} "
            f"(check --url, or that the port-forward's service is up)"
        ) from None
    if answer.status >= 400:
        raise BenchError(
            f"endpoint {url}: GET /v1/models answered HTTP {answer.status} {answer.reason}: "
            f"{snippet(answer)} (is {url} the Serve endpoint, port {SERVE_PORT}?)"
        )
    if not 200 <= answer.status < 300:
        what = redirected(answer, target) if answer.redirect else f"answered HTTP {answer.status} {answer.reason}"
        raise BenchError(
            f"endpoint {url}: GET /v1/models: {what} (pass --url with the Serve endpoint itself, port {SERVE_PORT})"
        )
    try:
        ids = [str(entry["id"]) for entry in parse_json(answer.body)["data"]]
    except (ValueError, KeyError, TypeError):  # ValueError: what kube.parse_json refuses, deep nesting included
        raise BenchError(
            f"endpoint {url}: GET /v1/models is not an OpenAI model list "
            f"({answer.content_type or 'no content type'}: {snippet(answer)}): is {url} the Serve "
            f"endpoint, port {SERVE_PORT}?"
        ) from None
    if model not in ids:
        raise BenchError(
            f"endpoint {url} does not serve {model!r} (GET /v1/models lists: {', '.join(ids) or 'none'}): "
            f"serving.model.id differs from the deployed model, or the application is still loading"
        )
    return ids


TOKENIZER_TIMEOUT = 600.0
# Loads the tokenizer the way aiperf 0.13 does (aiperf.common.tokenizer.Tokenizer.from_pretrained), else
# with transformers' AutoTokenizer; the last line on stderr is the cause.
_LOAD = """
import sys
name = sys.argv[1]
try:
    try:
        from aiperf.common.tokenizer import Tokenizer
    except ImportError:
        from transformers import AutoTokenizer
        AutoTokenizer.from_pretrained(name)
    else:
        Tokenizer.from_pretrained(name)
except BaseException as exc:
    print(" ".join(f"{type(exc).__name__}: {exc}".split()), file=sys.stderr)
    sys.exit(1)
"""


def _hub(env: dict) -> str:
    return (env.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _hub_unreachable(endpoint: str, timeout: float = 5.0) -> str | None:
    """Why the Hugging Face hub cannot be reached (a TCP connection within `timeout`), or None."""
    parts = urllib.parse.urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except OSError as exc:
        return f"cannot connect: {exc.strerror or exc}"


def _load(python: str, tokenizer: str, env: dict, timeout: float) -> str | None:
    try:
        run = subprocess.run(
            [python, "-c", _LOAD, tokenizer], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return f"loading took longer than {timeout:.0f} s"
    except OSError as exc:
        return f"cannot run {python}: {exc}"
    if run.returncode == 0:
        return None
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return lines[-1][:400] if lines else f"exit {run.returncode}"


def check_tokenizer(
    executable: str, tokenizer: str, *, env: dict | None = None, timeout: float = TOKENIZER_TIMEOUT
) -> None:
    """Load `tokenizer` with the Python that runs aiperf, in a subprocess; a BenchError with the cause and
    the fix when it cannot be loaded. A local folder is loaded as it is. A hub id is loaded offline first
    (HF_HUB_OFFLINE=1: from the hub cache, no network); only when it is not cached is it fetched, from a
    hub that must accept a connection within seconds (aiperf would retry for a minute first), into the
    cache aiperf then reads."""
    python = client_python(executable)
    if python is None:
        return  # no interpreter to ask; aiperf reports the tokenizer itself
    full_env = {**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1", **(env or {})}
    fix = (
        "pass --tokenizer (a Hugging Face id, or a local folder with tokenizer.json), or set "
        "benchmark.tokenizer in the stage file"
    )
    local = Path(tokenizer).expanduser()
    if local.is_dir():
        error = _load(python, str(local), full_env, timeout)
        if error is not None:
            raise BenchError(f"tokenizer folder {tokenizer!r} cannot be loaded: {error} ({fix})")
        return
    if local.exists() or tokenizer.startswith(("/", "./", "../", "~")):
        what = "is a file, not a folder" if local.exists() else "no such folder"
        raise BenchError(f"tokenizer {tokenizer!r}: {what} ({fix})")
    offline = _load(python, tokenizer, {**full_env, "HF_HUB_OFFLINE": "1"}, timeout)
    if offline is None:
        return
    if full_env.get("HF_HUB_OFFLINE", "") not in ("", "0") or full_env.get("TRANSFORMERS_OFFLINE", "") not in ("", "0"):
        raise BenchError(
            f"tokenizer {tokenizer!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: "
            f"{offline} (download it once online, or {fix})"
        )
    hub = _hub(full_env)
    why = _hub_unreachable(hub)
    if why:
        raise BenchError(
            f"tokenizer {tokenizer!r} is not in the Hugging Face cache and the hub {hub} cannot be "
            f"reached ({why}): download it once with network access, or {fix}"
        )
    online = _load(python, tokenizer, full_env, timeout)
    if online is not None:
        raise BenchError(f"tokenizer {tokenizer!r} cannot be loaded: {online} ({fix}; a gated model needs HF_TOKEN)")
