"""What the real operator does with a changed RayService under the stage's `upgradeStrategy: None`, on a
cluster of this module's own (the edits would disturb the other tests): a Serve config edit is one more PUT
to the same RayCluster; a pod-template change does nothing until the manual step `ops diff` prints is run,
and after it a new RayCluster comes up from the new spec."""

from __future__ import annotations

import copy
import dataclasses
import re
import shlex
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from charts.readiness import readiness_target
from clients import readiness
from clients.report import Report
from config.topology import INFERENCE_FILE, RENDERED_DIR
from localcluster import checks, deploy_order, ray_objects
from localcluster.apply import Applier
from localcluster.control_plane import LocalCluster
from localcluster.ray_head import RayHeadStandIn
from ops.diff.notes import manual_steps

from .conftest import stage_on_a_cluster_of_its_own

EDIT_LABEL = ("session.pd-inference/edit", "pod-template")


@dataclass
class Fresh:
    cluster: LocalCluster
    head: RayHeadStandIn
    rendered: dict[str, Any]  # the RayService as the deploy applies it
    desired: dict[str, Any]  # the RayService as last applied here

    @property
    def api(self):
        return self.cluster.api()

    def apply(self, service: dict[str, Any]) -> None:
        Applier(self.api).apply(service)
        self.desired = service


@pytest.fixture(scope="module")
def fresh(tmp_path_factory, dev_cfg, box, dev_steps):
    rendered = next(o for o in deploy_order.objects(dev_steps) if o["kind"] == "RayService")
    folder = tmp_path_factory.mktemp("upgrades")
    with stage_on_a_cluster_of_its_own(folder, dev_cfg, box, dev_steps) as (cluster, head, _):
        yield Fresh(cluster, head, rendered, rendered)


def _observed(fresh: Fresh, namespace: str, name: str) -> dict[str, Any]:
    """The RayService once the operator has reconciled its current generation."""

    def caught_up():
        service = ray_objects.ray_service(fresh.api, namespace, name) or {}
        status = service.get("status") or {}
        return service if status.get("observedGeneration") == service["metadata"]["generation"] else None

    return ray_objects.wait_until(caught_up, f"RayService {name} reconciled", alive=fresh.cluster.check_alive)


def _active(service: dict[str, Any]) -> str:
    return service["status"]["activeServiceStatus"]["rayClusterName"]


def _with_worker_label(rendered: dict[str, Any]) -> dict[str, Any]:
    edited = copy.deepcopy(rendered)
    (workers,) = edited["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    workers["template"]["metadata"].setdefault("labels", {})[EDIT_LABEL[0]] = EDIT_LABEL[1]
    return edited


def _with_serve_edit(rendered: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    edited = copy.deepcopy(rendered)
    config = yaml.safe_load(edited["spec"]["serveConfigV2"])
    config["applications"][0]["args"]["decode_config"]["deployment_config"]["max_ongoing_requests"] = 17
    edited["spec"]["serveConfigV2"] = yaml.safe_dump(config, sort_keys=False)
    return edited, config


def test_a_serve_config_edit_is_one_put_to_the_same_cluster(fresh, dev_cfg):
    namespace, name = dev_cfg.serving.namespace, dev_cfg.serving.service_name
    before = _observed(fresh, namespace, name)
    puts = len(fresh.head.state.puts())
    edited, config = _with_serve_edit(fresh.desired)
    fresh.apply(edited)
    ray_objects.wait_until(lambda: len(fresh.head.state.puts()) > puts, "the new PUT", alive=fresh.cluster.check_alive)
    after = _observed(fresh, namespace, name)
    new = fresh.head.state.puts()[puts:]
    assert [c.host.split(".")[0] for c in new] == [f"{_active(before)}-head-svc"]
    assert yaml.safe_load(new[0].body) == config
    assert _active(after) == _active(before)


def test_a_pod_template_change_leaves_the_running_cluster_alone(fresh, dev_cfg):
    namespace, name = dev_cfg.serving.namespace, dev_cfg.serving.service_name
    before = _observed(fresh, namespace, name)
    clusters = {c["metadata"]["name"] for c in ray_objects.ray_clusters(fresh.api, namespace)}
    puts = len(fresh.head.state.puts())
    fresh.apply(_with_worker_label(fresh.desired))
    after = _observed(fresh, namespace, name)
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert _active(after) == _active(before)
    assert {c["metadata"]["name"] for c in ray_objects.ray_clusters(fresh.api, namespace)} == clusters
    assert len(fresh.head.state.puts()) == puts
    running = ray_objects.pods(fresh.api, namespace, _active(after))
    assert not any(EDIT_LABEL[0] in p["metadata"]["labels"] for p in running)


def _printed_selector(tmp_path, rendered, edited, stage: str) -> str:
    """The label selector of the manual step `ops diff` prints for this change."""
    for side, obj in (("base", rendered), ("head", edited)):
        folder = tmp_path / side / RENDERED_DIR / stage
        folder.mkdir(parents=True)
        (folder / INFERENCE_FILE).write_text(yaml.safe_dump(obj))
    (step,) = manual_steps(tmp_path / "base", tmp_path / "head", stage)
    found = re.search(r"`(kubectl [^`]+)`", step)
    assert found, step
    command = shlex.split(found.group(1))
    assert command[:4] == ["kubectl", "-n", rendered["metadata"]["namespace"], "delete"]
    assert command[4:6] == ["raycluster", "-l"]
    return command[6]


def test_the_manual_step_ops_diff_prints_brings_a_cluster_of_the_new_spec(fresh, dev_cfg, tmp_path):
    namespace, name = dev_cfg.serving.namespace, dev_cfg.serving.service_name
    edited = _with_worker_label(fresh.desired)
    fresh.apply(edited)
    old = _active(_observed(fresh, namespace, name))
    selector = _printed_selector(tmp_path, fresh.rendered, edited, dev_cfg.stage)
    listed = fresh.api.get(f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters", labelSelector=selector)["items"]
    assert [c["metadata"]["name"] for c in listed] == [old]
    for raycluster in listed:  # what `kubectl delete -l` does: each listed object
        Applier(fresh.api).delete(raycluster, wait=60)
    made = checks.wait_ready(fresh.cluster, namespace, name)
    assert made.cluster_name != old
    assert all(p["metadata"]["labels"].get(EDIT_LABEL[0]) == EDIT_LABEL[1] for p in made.pods_of("worker"))


def test_an_invalid_upgrade_strategy_is_validation_failed_with_no_cluster(fresh, dev_cfg):
    namespace = dev_cfg.serving.namespace
    probe = copy.deepcopy(fresh.rendered)  # another RayService beside the stage's
    probe["metadata"]["name"] = "ray-llm-invalid"
    probe["spec"]["upgradeStrategy"]["type"] = "Replace"
    Applier(fresh.api).apply(probe)  # not fresh.apply: the stage's own RayService stays as it is

    def refused():
        service = ray_objects.ray_service(fresh.api, namespace, "ray-llm-invalid") or {}
        return ray_objects.condition(service, "Ready").get("reason") == "ValidationFailed" and service

    service = ray_objects.wait_until(refused, "ValidationFailed", alive=fresh.cluster.check_alive)
    assert ray_objects.condition(service, "Ready")["status"] == "False"
    owners = [
        ref["name"]
        for c in ray_objects.ray_clusters(fresh.api, namespace)
        for ref in c["metadata"].get("ownerReferences") or []
    ]
    assert "ray-llm-invalid" not in owners
    # ops verify's RayService check on it (the admin's token: the verify group may read the stage's name only).
    target = dataclasses.replace(readiness_target(dev_cfg), service_name="ray-llm-invalid")
    report = Report("verify", dev_cfg.stage)
    readiness.ray_service(target, fresh.api, report)
    (line,) = report.checks
    assert line.status == "fail" and "\n" not in line.detail
    assert "(Ready: ValidationFailed: " in line.detail and "Replace" in line.detail
