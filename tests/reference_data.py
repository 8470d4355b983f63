"""The upstream data the tests validate against, read where it comes from, never committed.

- KubeRay's chart (its crds/ and values.yaml) at the stage's version: the module cache, from the Go module proxy
  pinned by tools/go/kuberay-chart/go.sum (downloaded by scripts/setup.sh --cluster or --dev; here on demand).
- The device plugins' default values.yaml: no registry serves them, so the copy beside the checkout
  (../shared/helm-values/, which CI has); a test that needs one and does not find it skips with one line
  naming the file. This module is the only reader of that folder (tests/test_self_contained.py)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from config import versions
from localcluster import tools

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SHARED_VALUES = SHARED / "helm-values"


@functools.cache
def kuberay_chart() -> Path:
    """helm-chart/kuberay-operator of the pinned KubeRay module, checked to be the stage's chart version."""
    try:
        chart = tools.module_dir(tools.KUBERAY_CHART, tools.default_caches()) / "helm-chart" / "kuberay-operator"
    except tools.ToolError as exc:
        pytest.fail(f"KubeRay's chart from the Go module proxy: {exc}")
    version = str(yaml.safe_load((chart / "Chart.yaml").read_text())["version"])
    assert version == versions.KUBERAY_OPERATOR.version, f"{chart}: chart {version}"
    return chart


def kuberay_crd(kind: str) -> Path:
    """The chart's CRD of that kind (RayService, RayCluster, ...)."""
    return kuberay_chart() / "crds" / f"ray.io_{kind.lower()}s.yaml"


def shared_file(path: Path) -> Path:
    """A file of the folder beside the checkout, or a skip that names it."""
    if not path.is_file():
        pytest.skip(f"{path} is absent (the reference copy beside the checkout; CI has it)")
    return path


def chart_defaults(pin: versions.HelmChartPin, version: str | None = None) -> Path:
    """The chart's default values.yaml at the pinned (or given) version."""
    version = version or pin.version
    if pin.chart == versions.KUBERAY_OPERATOR.chart:
        assert version == versions.KUBERAY_OPERATOR.version, "only the pinned KubeRay chart is at hand"
        return kuberay_chart() / "values.yaml"
    return shared_file(SHARED_VALUES / f"{pin.chart}-{version}.values.yaml")
