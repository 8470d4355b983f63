"""One real control plane for the cluster tests: kube-apiserver, kube-controller-manager, kube-scheduler,
etcd and kwok, built from the Go module proxy into Go's own caches (scripts/setup.sh --dev builds them) and
started on loopback with the dev stage's nodes Ready; the dev stage applied as a deploy applies it, the
kuberay-operator chart installed by the kubectl layer's helm and the real KubeRay operator running out of
cluster against a stand-in Ray head."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from config import load_stages
from localcluster import checks, deploy_order, session, tools
from localcluster.apply import Applier
from localcluster.ray_head import RayHeadStandIn


@pytest.fixture(scope="session")
def dev_cfg():
    (cfg,) = load_stages("config", only="dev")
    return cfg


@pytest.fixture(scope="session")
def box(dev_cfg) -> session.Toolbox:
    if shutil.which("go") is None:
        pytest.fail("the go command is missing: Go 1.26 builds the local cluster (README: the test command's needs)")
    try:
        return session.toolbox(dev_cfg)
    except tools.ToolError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def dev_assembly(tmp_path_factory, dev_cfg) -> Path:
    return session.synthesize(dev_cfg, tmp_path_factory.mktemp("cdk") / "cdk.out")


@pytest.fixture(scope="session")
def dev_steps(dev_assembly):
    return deploy_order.steps(dev_assembly)


@pytest.fixture(scope="session")
def ray_head():
    with RayHeadStandIn() as head:
        yield head


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, dev_cfg, box):
    local = session.start(dev_cfg, tmp_path_factory.mktemp("cluster"), box)
    yield local
    local.stop()


@pytest.fixture(scope="session")
def installed(cluster, dev_steps, box, ray_head):
    """The dev stage applied in deploy order (what stands in for each chart: session.STAND_INS)."""
    return session.install(cluster, dev_steps, box, ray_head)


@pytest.fixture(scope="session")
def made(cluster, installed, dev_cfg):
    """What the operator made of the dev RayService once it is Ready."""
    return checks.wait_ready(cluster, dev_cfg.serving.namespace, dev_cfg.serving.service_name)


@pytest.fixture
def admin(cluster) -> Applier:
    return Applier(cluster.api())


@contextmanager
def stage_on_a_cluster_of_its_own(folder: Path, cfg, box, steps) -> Iterator[tuple]:
    """(cluster, stand-in head, what the operator made): the stage installed on a new cluster and Ready, for tests
    whose edits would disturb the session's cluster; stopped afterwards."""
    with RayHeadStandIn() as head:
        cluster = session.start(cfg, folder, box)
        try:
            session.install(cluster, steps, box, head)
            yield cluster, head, checks.wait_ready(cluster, cfg.serving.namespace, cfg.serving.service_name)
        finally:
            cluster.stop()
