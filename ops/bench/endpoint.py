"""Reaching a stage's OpenAI endpoint from this machine.

The Serve endpoint is a ClusterIP service (`<service_name>-serve-svc`, port 8000) in the serving
namespace: not exposed outside the cluster on purpose. `bench --stage` opens `kubectl port-forward` to
it (the kubeconfig from the stage's `aws eks update-kubeconfig` output) unless `--url` names an
endpoint the caller reaches already (an ingress, or a run inside the VPC).
"""
from __future__ import annotations

import queue
import re
import subprocess
import threading
from contextlib import contextmanager
from typing import Iterator

from .aiperf import BenchError

SERVE_PORT = 8000
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")


def serve_service(service_name: str) -> str:
    """The Service KubeRay creates for a RayService's Serve endpoint."""
    return f"{service_name}-serve-svc"


@contextmanager
def port_forward(namespace: str, service: str, *, kubectl: str = "kubectl", remote_port: int = SERVE_PORT,
                 timeout: float = 30.0) -> Iterator[str]:
    """Yield http://127.0.0.1:<local port> forwarded to the service; stop kubectl on exit."""
    argv = [kubectl, "--namespace", namespace, "port-forward", f"service/{service}", f":{remote_port}",
            "--address", "127.0.0.1"]
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise BenchError(f"cannot run {kubectl}: {exc} (install kubectl, or pass --url)") from None
    lines: "queue.Queue[tuple[str, str | None]]" = queue.Queue()

    def pump(stream, name):
        for line in stream:
            lines.put((name, line.rstrip()))
        lines.put((name, None))  # the stream closed

    for stream, name in ((proc.stdout, "out"), (proc.stderr, "err")):
        threading.Thread(target=pump, args=(stream, name), daemon=True).start()
    port, errors, closed = None, [], 0
    try:
        while port is None:
            try:
                _, line = lines.get(timeout=timeout)
            except queue.Empty:
                raise BenchError(f"kubectl port-forward to {namespace}/{service} gave no port within "
                                 f"{timeout:.0f} s") from None
            if line is None:
                closed += 1
                if closed == 2:
                    proc.wait(5)
                    detail = errors[-1] if errors else f"exit {proc.returncode}"
                    raise BenchError(f"kubectl port-forward to {namespace}/{service} failed: {detail} "
                                     f"(run the stage's update-kubeconfig command, or pass --url)")
                continue
            match = _FORWARDING.search(line)
            if match:
                port = int(match.group(1))
            elif line:
                errors.append(line)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
