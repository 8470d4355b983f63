"""What a deploy does not do on its own, read from the rendered output: a change to the RayService's Ray pods
under `upgradeStrategy: None` (the manual step is printed), a KubeRay operator bump (what to rehearse and check);
and, from each side's stage file, GPUs that the replica counts leave idle (the stage's own warning)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from config import ConfigError, StageConfig, load_stage_file
from config.derived import idle_gpu_count
from config.rules import serving_roles
from config.topology import HELM_RELEASES_FILE, KUBERAY_RELEASE, RENDERED_DIR
from config.versions import KUBERAY_OPERATOR

from .kubernetes import ray_services

# KubeRay 1.6.2 with upgradeStrategy None neither updates nor replaces the running RayCluster for a changed
# rayClusterConfig; deleting the RayCluster makes it prepare a new one from the current spec.
# Why: docs/DECISIONS.md, "A RayCluster change under upgradeStrategy None".
KUBERAY_VERSION = KUBERAY_OPERATOR.version
RAY_SERVICE_LABELS = "ray.io/originated-from-cr-name={name},ray.io/originated-from-crd=RayService"


def _changed_paths(before: Any, after: Any, path: str = "") -> list[str]:
    """The leaf paths where two JSON-like values differ (`workerGroupSpecs[0].template.spec...`)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            found
            for key in sorted(set(before) | set(after), key=str)
            for found in _changed_paths(before.get(key), after.get(key), f"{path}.{key}" if path else str(key))
        ]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            found
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for found in _changed_paths(b, a, f"{path}[{i}]")
        ]
    return [] if before == after else [path or "(all)"]


def manual_steps(base_out: Path, head_out: Path, stage: str) -> list[str]:
    steps = []
    before_all, after_all = ray_services(base_out, stage), ray_services(head_out, stage)
    for (namespace, name), after in sorted(after_all.items()):
        before = before_all.get((namespace, name))
        strategy = (after.get("upgradeStrategy") or {}).get("type")
        if before is None or strategy != "None":
            continue
        changed = _changed_paths(before.get("rayClusterConfig"), after.get("rayClusterConfig"))
        if not changed:
            continue
        shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
        steps.append(
            f"RayService {namespace}/{name}: rayClusterConfig changed ({shown}) under upgradeStrategy None: "
            f"KubeRay {KUBERAY_VERSION} neither updates nor replaces the running Ray pods. After the deploy, run "
            f"`kubectl -n {namespace} delete raycluster -l {RAY_SERVICE_LABELS.format(name=name)}`: KubeRay "
            f"recreates the RayCluster from the new spec (the endpoint is down until the model is loaded again; "
            f"deleting only the pods brings back the old spec)"
        )
    return steps


def _operator_version(out: Path, stage: str) -> str | None:
    path = out / RENDERED_DIR / stage / HELM_RELEASES_FILE
    if not path.is_file():
        return None
    releases = [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]
    return next((str(r.get("version")) for r in releases if r.get("release") == KUBERAY_RELEASE), None)


def _images(spec: dict) -> set[str]:
    cluster = spec.get("rayClusterConfig") or {}
    templates = [(cluster.get("headGroupSpec") or {}).get("template") or {}]
    templates += [(group.get("template") or {}) for group in cluster.get("workerGroupSpecs") or []]
    return {c.get("image", "") for t in templates for c in (t.get("spec") or {}).get("containers") or []} - {""}


def image_bumps(base_out: Path, head_out: Path, stage: str) -> list[str]:
    """A changed Ray image of a RayService: every node pulls it again (tens of GB)."""
    before_all, after_all = ray_services(base_out, stage), ray_services(head_out, stage)
    notes = []
    for (namespace, name), after in sorted(after_all.items()):
        before = before_all.get((namespace, name))
        old, new = (_images(before) if before else set()), _images(after)
        if before is not None and old != new:
            notes.append(
                f"RayService {namespace}/{name}: Ray image {', '.join(sorted(old))} -> {', '.join(sorted(new))}: "
                "every Ray pod pulls it again (tens of GB per node); check the new tag's Ray and vLLM against "
                "config/versions.py DLC_RAY_VERSIONS and VLLM_VERSION"
            )
    return notes


def operator_bumps(base_out: Path, head_out: Path, stage: str) -> list[str]:
    """A changed kuberay-operator chart version: the deploy applies the new CRDs, then upgrades the chart."""
    before, after = _operator_version(base_out, stage), _operator_version(head_out, stage)
    if before is None or after is None or before == after:
        return []
    return [
        (
            f"KubeRay operator {before} -> {after} (Helm release {KUBERAY_RELEASE}): the cluster stack applies {after}'s "
            f"CRDs server-side before the chart upgrade (Helm never upgrades crds/), then the new operator "
            f"re-reconciles every RayService. Rehearse it first (`python -m ops local-cluster --stage {stage}` "
            f"runs the pinned operator, tools/go/kuberay-operator), and after the deploy run "
            f"`python -m ops verify --stage {stage}`"
        )
    ]


def _stage_config(tree: Path, stage: str) -> StageConfig | None:
    """A side's stage file as this code reads it; None without one, or when this code refuses it (a base from before
    a change of the schema)."""
    path = tree / "config" / f"{stage}.yaml"
    try:
        return load_stage_file(path, warn=lambda line: None) if path.is_file() else None
    except ConfigError:
        return None


def idle_gpus(base_tree: Path, head_tree: Path, stage: str) -> str:
    """The head's idle-GPU warning (config/rules/serving_roles.py idle_gpus), and the base's count when it differs."""
    head, base = _stage_config(head_tree, stage), _stage_config(base_tree, stage)
    found = serving_roles.idle_gpus(head) if head else None
    if head is None or found is None:
        return ""
    was = idle_gpu_count(base) if base else None
    return found[1] + (f" (base: {was} idle)" if was is not None and was != idle_gpu_count(head) else "")
