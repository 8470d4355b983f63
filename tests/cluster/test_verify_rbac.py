"""The verify group's rights on a real RBAC authorizer (SubjectAccessReviews), and `ops verify`'s
Kubernetes checks run with a real token bound to that group, over TLS."""

from __future__ import annotations

import copy

import pytest

from config.topology import VERIFY_GROUP
from localcluster import checks


def _ids(requests):
    return [checks.describe_request(r) for r in requests]


@pytest.fixture(scope="module")
def dev_requests(dev_cfg):
    return checks.verify_requests(dev_cfg), checks.forbidden_requests(dev_cfg)


def test_every_request_verify_makes_is_allowed(cluster, installed, dev_requests):
    allowed, _ = dev_requests
    assert {checks.describe_request(r): checks.access_review(cluster, VERIFY_GROUP, r) for r in allowed} == {
        checks.describe_request(r): True for r in allowed
    }


def test_secrets_exec_writes_and_the_dashboard_post_are_denied(cluster, installed, dev_requests):
    _, forbidden = dev_requests
    assert {checks.describe_request(r): checks.access_review(cluster, VERIFY_GROUP, r) for r in forbidden} == {
        checks.describe_request(r): False for r in forbidden
    }


def test_rbac_names_a_proxied_port_as_service_colon_port(cluster, installed, dev_cfg):
    # The roles grant `ray-llm-serve-svc:serve`; the bare service name is another name to RBAC.
    request = ("get", "services", "proxy", dev_cfg.serving.namespace, "ray-llm-serve-svc")
    assert checks.access_review(cluster, VERIFY_GROUP, request) is False


def test_verify_reads_the_nodes_over_tls_with_the_verify_token(cluster, installed, dev_cfg):
    report = checks.verify_checks(dev_cfg, cluster)
    nodes = report.find("GPU nodes")
    assert (nodes.status, nodes.detail) == ("pass", "2 nodes Ready, each with 1 GPU, 1 EFA allocatable")


def test_verify_may_read_the_operator_and_the_rayservice(cluster, made, dev_cfg):
    # The chart's Deployment and the operator's RayService status, read with the verify group's token.
    report = checks.verify_checks(dev_cfg, cluster)
    assert report.find("KubeRay operator").detail == "1 replica(s) available in kuberay-system"
    assert report.find("RayService").detail == "ray-llm Ready, application llm RUNNING"


def test_verify_fails_when_the_serving_role_loses_its_rayservice_rule(cluster, installed, made, admin, dev_cfg):
    role = copy.deepcopy(
        next(
            o
            for o in installed.objects
            if o["kind"] == "Role" and o["metadata"]["namespace"] == dev_cfg.serving.namespace
        )
    )
    original = copy.deepcopy(role)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        role["metadata"].pop(key, None)
        original["metadata"].pop(key, None)
    role["rules"] = [r for r in role["rules"] if "rayservices" not in r["resources"]]
    admin.apply(role)
    try:
        report = checks.verify_checks(dev_cfg, cluster)
        check = report.find("RayService")
        assert check.status == "fail" and "HTTP 403" in check.detail
    finally:
        admin.apply(original)
    assert checks.verify_checks(dev_cfg, cluster).find("RayService").detail == "ray-llm Ready, application llm RUNNING"
