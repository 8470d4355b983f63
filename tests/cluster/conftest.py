"""One real control plane for the cluster tests: kube-apiserver, kube-controller-manager, kube-scheduler,
etcd and kwok, built from the Go module proxy (cached in .cluster-tools/; scripts/setup.sh --dev builds them)
and started on loopback, with the dev stage's nodes Ready and the dev stage applied as a deploy applies it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from config import load_stages
from localcluster import deploy_order, rehearsal, tools
from localcluster.apply import Applier


@pytest.fixture(scope="session")
def dev_cfg():
    (cfg,) = load_stages("config", only="dev")
    return cfg


@pytest.fixture(scope="session")
def binaries():
    if shutil.which("go") is None:
        pytest.fail("the go command is missing: Go 1.26 builds the local cluster (README: the test command's needs)")
    try:
        return rehearsal.build_tools()
    except tools.ToolError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def dev_assembly(tmp_path_factory, dev_cfg) -> Path:
    return rehearsal.synthesize(dev_cfg, tmp_path_factory.mktemp("cdk") / "cdk.out")


@pytest.fixture(scope="session")
def dev_steps(dev_assembly):
    return deploy_order.steps(dev_assembly)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, dev_cfg, binaries):
    local = rehearsal.start(dev_cfg, tmp_path_factory.mktemp("cluster"), binaries)
    yield local
    local.stop()


@pytest.fixture(scope="session")
def installed(cluster, dev_steps):
    """The dev stage applied in deploy order (what stands in for each chart: rehearsal.STAND_INS)."""
    return rehearsal.install(cluster, dev_steps)


@pytest.fixture
def admin(cluster) -> Applier:
    return Applier(cluster.api())
