"""Server-side apply, as `kubectl apply --server-side` does it: PATCH with the apply content type, the
field manager named, and strict field validation, so a field the schema does not know (a misspelt key in
a pod template, an unknown key in the RayService) is refused by the API server rather than dropped.

The API path of each object comes from the server's own discovery (GET /api/v1, /apis/GROUP/VERSION): the
resource name and whether it is namespaced are the server's answer, not a table here."""

from __future__ import annotations

import time
from typing import Any

from clients.kube import KubeApi, KubeError

FIELD_MANAGER = "pd-inference-rehearsal"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"  # JSON is YAML; kubectl sends this type too


class ApplyError(Exception):
    """One line: which object the API server refused, and its reason."""


def describe(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


class Applier:
    def __init__(self, api: KubeApi) -> None:
        self.api = api
        self._discovery: dict[str, list[dict[str, Any]]] = {}

    def _resources(self, api_version: str, *, refresh: bool = False) -> list[dict[str, Any]]:
        if refresh or api_version not in self._discovery:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            self._discovery[api_version] = self.api.get(base)["resources"]
        return self._discovery[api_version]

    def path(self, obj: dict[str, Any], *, wait: float = 0.0) -> str:
        """The object's API path; waits up to `wait` s for a kind that discovery does not list yet (a CRD
        just created takes a moment to be served)."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        deadline = time.monotonic() + wait
        while True:
            try:
                resources = self._resources(api_version, refresh=True) if wait else self._resources(api_version)
            except KubeError as exc:
                if exc.status != 404 or time.monotonic() >= deadline:
                    raise ApplyError(f"{describe(obj)}: the API server does not serve {api_version} ({exc})") from None
                resources = []
            resource = next((r for r in resources if r.get("kind") == kind and "/" not in r["name"]), None)
            if resource:
                break
            if time.monotonic() >= deadline:
                raise ApplyError(f"{describe(obj)}: the API server serves no kind {kind} in {api_version}")
            time.sleep(0.5)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        name = obj["metadata"]["name"]
        if resource["namespaced"]:
            namespace = obj["metadata"].get("namespace") or "default"
            return f"{base}/namespaces/{namespace}/{resource['name']}/{name}"
        return f"{base}/{resource['name']}/{name}"

    def apply(
        self, obj: dict[str, Any], *, dry_run: bool = False, wait: float = 10.0, manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """The object as the API server stored it (or would: `dry_run` runs admission, stores nothing), its
        fields owned by `manager`."""
        query = {"fieldManager": manager, "fieldValidation": "Strict", "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        path = self.path(obj, wait=wait)
        try:
            return self.api.request("PATCH", path, query=query, body=obj, content_type=APPLY_CONTENT_TYPE)
        except KubeError as exc:
            raise ApplyError(f"{describe(obj)}: {exc}") from None

    def create(self, obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """POST (as a controller creates a pod), strict field validation, optionally a dry run."""
        path = self.path(obj).rsplit("/", 1)[0]
        query = {"fieldValidation": "Strict", **({"dryRun": "All"} if dry_run else {})}
        try:
            return self.api.request("POST", path, query=query, body=obj)
        except KubeError as exc:
            raise ApplyError(f"{describe(obj)}: {exc}") from None

    def delete(self, obj: dict[str, Any], *, wait: float = 60.0) -> None:
        """DELETE with foreground propagation, then wait until the object is gone (finalizers done)."""
        path = self.path(obj)
        try:
            self.api.request(
                "DELETE", path, body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"}
            )
        except KubeError as exc:
            if exc.status == 404:
                return
            raise ApplyError(f"deleting {describe(obj)}: {exc}") from None
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                self.api.get(path)
            except KubeError as exc:
                if exc.status == 404:
                    return
                raise ApplyError(f"deleting {describe(obj)}: {exc}") from None
            time.sleep(0.5)
        raise ApplyError(f"{describe(obj)} was not gone within {wait:g} s of its deletion (a finalizer left?)")


def strip_status(obj: dict[str, Any]) -> dict[str, Any]:
    """What is applied of an object: everything but its status (the status subresource is the controller's)."""
    return {k: v for k, v in obj.items() if k != "status"}
