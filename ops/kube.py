"""A minimal Kubernetes API client over urllib: GET/POST JSON, pod and service-proxy paths.

Only what verify needs; no kubectl, no kubeconfig. The Ray dashboard and the Serve endpoint are reached
through the API server's service proxy (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/...`), so no
port-forward is needed and nothing else must be reachable from where verify runs.
"""
from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Optional

from .errors import describe


class KubeError(Exception):
    """One line: which request failed and why."""


@dataclass
class KubeApi:
    endpoint: str
    token: str
    ca_data: Optional[str] = None  # base64 PEM, as EKS returns it
    timeout: float = 30.0

    def _context(self) -> Optional[ssl.SSLContext]:
        if not self.endpoint.startswith("https://"):
            return None
        context = ssl.create_default_context()
        if self.ca_data:
            context.load_verify_locations(cadata=base64.b64decode(self.ca_data).decode())
        return context

    def request(self, method: str, path: str, *, query: Optional[dict] = None, body: Any = None,
                raw: bool = False, timeout: Optional[float] = None) -> Any:
        url = self.endpoint.rstrip("/") + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout, context=self._context()) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise KubeError(f"{method} {path}: HTTP {exc.code} {' '.join(str(detail).split())}") from None
        except Exception as exc:  # noqa: BLE001 - any transport failure becomes one line
            raise KubeError(f"{method} {path}: {describe(exc)}") from None
        if raw:
            return payload.decode(errors="replace")
        try:
            return json.loads(payload)
        except ValueError:
            raise KubeError(f"{method} {path}: the answer is not JSON") from None

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def service_path(self, namespace: str, service: str, port: str, path: str) -> str:
        return f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}"
