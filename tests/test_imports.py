"""The committed typed KubeRay classes (imports/) are exactly what `scripts/import_kuberay.sh` generates
from the vendored CRD with the pinned cdk8s CLI: nobody edited them by hand, and neither the CRD nor
the CLI pin changed without a regeneration."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import cdk8s
import pytest

from .helpers import KUBERAY_CRDS, ROOT, data_file

IMPORTS = ROOT / "imports"


def _tree(root: Path) -> dict[str, bytes]:
    """Every generated file under root by relative path (bytecode caches left out)."""
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npx") is None,
                    reason="Node.js (node and npx) is not installed: the cdk8s CLI cannot run here")
def test_committed_imports_equal_a_fresh_cdk8s_import(tmp_path):
    data_file(KUBERAY_CRDS / "ray.io_rayservices.yaml")  # what the script imports: a clear failure if missing
    subprocess.run([str(ROOT / "scripts" / "import_kuberay.sh"), str(tmp_path)], check=True,
                   capture_output=True, text=True, timeout=300)
    fresh, committed = _tree(tmp_path), _tree(IMPORTS)
    assert sorted(fresh) == sorted(committed), "generated file set differs: run scripts/import_kuberay.sh"
    changed = [name for name in fresh if fresh[name] != committed[name]]
    assert not changed, f"imports/ differs from a fresh import in {changed}: run scripts/import_kuberay.sh"


def test_the_generated_classes_render_a_rayservice_and_refuse_a_misspelt_field():
    from imports.io import ray

    cluster = ray.RayServiceSpecRayClusterConfig(
        ray_version="2.58.0", head_group_spec=ray.RayServiceSpecRayClusterConfigHeadGroupSpec(
            template=ray.RayServiceSpecRayClusterConfigHeadGroupSpecTemplate()))
    manifest = ray.RayService.manifest(
        metadata=cdk8s.ApiObjectMetadata(name="ray-llm"),
        spec=ray.RayServiceSpec(serve_config_v2="applications: []\n", ray_cluster_config=cluster,
                                upgrade_strategy=ray.RayServiceSpecUpgradeStrategy(type="None")))
    assert manifest == {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "ray-llm"},
                        "spec": {"rayClusterConfig": {"headGroupSpec": {"template": {}}, "rayVersion": "2.58.0"},
                                 "serveConfigV2": "applications: []\n", "upgradeStrategy": {"type": "None"}}}
    with pytest.raises(TypeError, match="serve_config"):
        ray.RayServiceSpec(serve_config="applications: []\n")  # type: ignore[call-arg]


def test_only_the_rayservice_crd_is_imported():
    # The chart creates no RayCluster; its CRD would double the module (docs/DECISIONS.md).
    text = (IMPORTS / "io" / "ray" / "__init__.py").read_text()
    assert re.search(r"^class RayService\(", text, re.MULTILINE)
    assert not re.search(r"^class RayCluster\(", text, re.MULTILINE)
