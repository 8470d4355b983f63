"""The rendered Kubernetes side of a synth (k8s/<stage>/: the YAML the charts rendered and the Helm values):
a unified diff per file, and the RayService specs the notes read."""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml

from config.topology import INFERENCE_FILE, RENDERED_DIR, RENDERED_FILES

K8S_FILES = RENDERED_FILES


def k8s_diffs(base_out: Path, head_out: Path, stage: str) -> dict[str, str]:
    diffs = {}
    for name in K8S_FILES:
        old, new = base_out / RENDERED_DIR / stage / name, head_out / RENDERED_DIR / stage / name
        old_lines = old.read_text().splitlines(keepends=True) if old.exists() else []
        new_lines = new.read_text().splitlines(keepends=True) if new.exists() else []
        text = "".join(
            difflib.unified_diff(old_lines, new_lines, f"base/k8s/{stage}/{name}", f"head/k8s/{stage}/{name}")
        )
        if text:
            diffs[name] = text
    return diffs


def _documents(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


def ray_services(out: Path, stage: str) -> dict[tuple[str, str], dict]:
    """{(namespace, name): spec} of every RayService the stage renders."""
    return {
        ((doc.get("metadata") or {}).get("namespace", "default"), (doc.get("metadata") or {}).get("name", "")): doc.get(
            "spec"
        )
        or {}
        for doc in _documents(out / RENDERED_DIR / stage / INFERENCE_FILE)
        if doc.get("kind") == "RayService"
    }
