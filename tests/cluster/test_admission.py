"""Every object the dev stage applies is admitted by the real kube-apiserver 1.35 (server-side apply,
strict field validation), the RayService against the KubeRay CRDs; a broken object is refused."""

from __future__ import annotations

import copy

import pytest
import yaml

from localcluster import deploy_order
from localcluster.apply import ApplyError


def test_every_object_of_the_deploy_is_admitted(installed, dev_steps):
    expected = [(o["kind"], o["metadata"]["name"]) for o in deploy_order.objects(dev_steps)]
    assert [(o["kind"], o["metadata"]["name"]) for o in installed.objects] == expected
    assert all(o["metadata"].get("uid") for o in installed.objects)  # stored, not a dry run


def test_the_api_server_reports_the_pinned_version(cluster):
    assert cluster.api().get("/version")["gitVersion"] == "v1.35.4"


def test_the_stored_serve_config_is_the_rendered_one(installed, dev_steps):
    rendered = next(o for o in deploy_order.objects(dev_steps) if o["kind"] == "RayService")
    stored = next(o for o in installed.objects if o["kind"] == "RayService")
    assert stored["spec"]["serveConfigV2"] == rendered["spec"]["serveConfigV2"]
    assert yaml.safe_load(stored["spec"]["serveConfigV2"])["applications"]


def test_the_stored_pod_templates_keep_every_field_we_set(installed, dev_steps):
    # A field the CRD's schema does not know would be pruned silently without strict validation.
    rendered = next(o for o in deploy_order.objects(dev_steps) if o["kind"] == "RayService")
    stored = next(o for o in installed.objects if o["kind"] == "RayService")
    for path in (("headGroupSpec",), ("workerGroupSpecs", 0)):
        want, got = rendered["spec"]["rayClusterConfig"], stored["spec"]["rayClusterConfig"]
        for key in path:
            want, got = want[key], got[key]
        assert (
            got["template"]["spec"]["containers"][0]["securityContext"]
            == want["template"]["spec"]["containers"][0]["securityContext"]
        )
        assert got["template"]["spec"].get("volumes") == want["template"]["spec"].get("volumes")


def _ray_service(dev_steps):
    return copy.deepcopy(next(o for o in deploy_order.objects(dev_steps) if o["kind"] == "RayService"))


# Server-side apply refuses a field the CRD's structural schema does not declare while it builds the typed
# patch, before strict validation: kube-apiserver 1.35 answers HTTP 500 "field not declared in schema"
# (seen here), not the 400 "unknown field" that a create with fieldValidation=Strict gives.
def test_an_unknown_field_in_the_rayservice_is_refused(installed, admin, dev_steps):
    broken = _ray_service(dev_steps)
    broken["spec"]["upgradeStrategy"]["tpye"] = "None"
    with pytest.raises(ApplyError, match=r"\.spec\.upgradeStrategy\.tpye: field not declared in schema"):
        admin.apply(broken, dry_run=True)


def test_an_unknown_field_in_the_rayservice_is_refused_on_create_too(installed, admin, dev_steps):
    broken = _ray_service(dev_steps)
    broken["metadata"]["name"] = "ray-llm-probe"
    broken["spec"]["upgradeStrategy"]["tpye"] = "None"
    with pytest.raises(ApplyError, match=r'HTTP 400 .*unknown field "spec.upgradeStrategy.tpye"'):
        admin.create(broken, dry_run=True)


def test_a_misspelt_field_in_a_pod_template_is_refused(installed, admin, dev_steps):
    broken = _ray_service(dev_steps)
    broken["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0][
        "securityContxt"
    ] = {}
    with pytest.raises(ApplyError, match=r"securityContxt: field not declared in schema"):
        admin.apply(broken, dry_run=True)


def test_a_value_of_the_wrong_type_is_refused(installed, admin, dev_steps):
    broken = _ray_service(dev_steps)
    broken["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = "two"
    with pytest.raises(
        ApplyError, match=r"workerGroupSpecs\[0\]\.replicas: expected numeric \(int or float\), got string"
    ):
        admin.apply(broken, dry_run=True)


def test_the_crd_leaves_upgrade_strategy_values_to_the_operator(installed, admin, dev_steps):
    # KubeRay 1.6.2's CRD declares spec.upgradeStrategy.type as a plain string (no enum): a value the operator
    # does not know is admitted by the API server; only the operator, or config/schema.py, can refuse it.
    probe = _ray_service(dev_steps)
    probe["spec"]["upgradeStrategy"]["type"] = "Replace"
    assert admin.apply(probe, dry_run=True)["spec"]["upgradeStrategy"]["type"] == "Replace"


def test_an_unknown_field_in_a_network_policy_is_refused(installed, admin, dev_steps):
    policy = copy.deepcopy(next(o for o in deploy_order.objects(dev_steps) if o["kind"] == "NetworkPolicy"))
    policy["spec"]["podSelectr"] = {}
    with pytest.raises(ApplyError, match=r"\.spec\.podSelectr: field not declared in schema"):
        admin.apply(policy, dry_run=True)
