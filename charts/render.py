"""Readable Kubernetes YAML for review: what each stage applies to its cluster, written beside the
CloudFormation templates (cdk.out/k8s/<stage>/) so reviewers can read and diff it.

- `inference.yaml`: the serving chart's objects, `serveConfigV2` as a readable block;
- `serve-config.yaml`: the Ray Serve application config on its own;
- `helm-releases.yaml`: every Helm release: chart, repository, version, namespace and values;
- `eks-addons.yaml`: every EKS add-on: name, stack, version and configuration.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from config.topology import EKS_ADDONS_FILE, HELM_RELEASES_FILE, INFERENCE_FILE, RENDERED_DIR, SERVE_CONFIG_FILE

# libyaml's emitter when PyYAML has it (the wheels do): the same YAML, several times faster to write.
try:
    from yaml import CSafeDumper as SafeDumper
except ImportError:  # a PyYAML built without libyaml
    from yaml import SafeDumper


class _ReadableDumper(SafeDumper):
    """Multi-line strings (serveConfigV2, SecretProviderClass objects) as `|` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _str)


def to_yaml(documents: Iterable[Any]) -> str:
    return yaml.dump_all(list(documents), Dumper=_ReadableDumper, sort_keys=False, width=120, default_flow_style=False)


@dataclass(frozen=True)
class StageRendering:
    stage: str
    objects: list[dict[str, Any]]
    serve_config: dict[str, Any]
    helm_releases: list[dict[str, Any]]
    eks_addons: list[dict[str, Any]]

    def files(self) -> dict[str, str]:
        return {
            INFERENCE_FILE: to_yaml(self.objects),
            SERVE_CONFIG_FILE: to_yaml([self.serve_config]),
            HELM_RELEASES_FILE: to_yaml(self.helm_releases),
            EKS_ADDONS_FILE: to_yaml(self.eks_addons),
        }


def write(outdir: str | os.PathLike, renderings: Iterable[StageRendering]) -> Path:
    """Write each stage to <outdir>/k8s/<stage>/, replacing what an earlier synth wrote for it; the other
    stages' folders stay. Files are written to a temporary folder first and each stage's moved in whole:
    never a half-written stage."""
    target = Path(outdir) / RENDERED_DIR
    target.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".k8s-", dir=target.parent))
    try:
        for rendering in renderings:
            stage_dir = staging / rendering.stage
            stage_dir.mkdir()
            for name, text in rendering.files().items():
                (stage_dir / name).write_text(text, encoding="utf-8")
        for stage_dir in staging.iterdir():
            shutil.rmtree(target / stage_dir.name, ignore_errors=True)
            stage_dir.rename(target / stage_dir.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
