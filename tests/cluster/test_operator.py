"""The real KubeRay operator (the stage's version, built from the Go module proxy) reconciles the dev
RayService on the local control plane: what it makes, what it sends to the Ray head, and with whose rights."""

from __future__ import annotations

import json

import yaml

from config.topology import KUBERAY_NAMESPACE, KUBERAY_RELEASE
from localcluster import checks, ray_objects, session, tools
from tests.helpers import config_with


def test_the_operator_and_its_chart_are_the_stage_version(dev_cfg):
    assert tools.KUBERAY_OPERATOR.version() == f"v{dev_cfg.addons.kuberay_operator}"
    assert tools.KUBERAY_CHART.version() == f"v{dev_cfg.addons.kuberay_operator}"


def test_the_rayservice_is_ready_with_a_head_and_both_workers_running(made):
    assert ray_objects.condition(made.service, "Ready")["status"] == "True"
    assert [len(made.pods_of("head")), len(made.pods_of("worker"))] == [1, 2]
    assert all(p["status"]["phase"] == "Running" for p in made.pods)


def test_the_raycluster_is_owned_by_the_rayservice_and_named_after_it(made, dev_cfg):
    (owner,) = made.cluster["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("RayService", dev_cfg.serving.service_name, True)
    assert made.cluster_name.startswith(f"{dev_cfg.serving.service_name}-")


def test_the_operator_makes_the_stable_and_the_per_cluster_services(made, dev_cfg):
    name = dev_cfg.serving.service_name
    assert sorted(made.services) == sorted([f"{name}-head-svc", f"{name}-serve-svc", f"{made.cluster_name}-head-svc"])


def test_every_service_selects_the_operators_pods_and_its_slices_hold_them(made):
    assert checks.service_problems(made) == []


def test_the_serve_service_selects_the_pods_that_answer_the_serve_health_check(made, dev_cfg):
    # The operator labels a pod ray.io/serve=true after GET :8000/-/healthz answers `success`.
    serve = made.services[f"{dev_cfg.serving.service_name}-serve-svc"]
    selected = {p["metadata"]["name"] for p in made.pods if ray_objects.selects(serve, p)}
    assert selected == {p["metadata"]["name"] for p in made.pods if p["metadata"]["labels"]["ray.io/serve"] == "true"}
    assert selected


def test_the_put_body_is_the_rendered_serve_config(made, ray_head, dev_steps):
    rendered = next(o for o in session.deploy_order.objects(dev_steps) if o["kind"] == "RayService")
    bodies = checks.put_bodies(ray_head, made)
    assert bodies and all(body == yaml.safe_load(rendered["spec"]["serveConfigV2"]) for body in bodies)


def test_the_put_goes_to_the_per_cluster_head_service_dashboard(made, ray_head):
    hosts = {call.host for call in ray_head.state.puts()}
    assert checks.serve_config_host(made) in hosts
    assert checks.serve_config_host(made).startswith(f"{made.cluster_name}-head-svc.")


def test_the_operator_makes_no_call_the_stand_in_does_not_know(made, ray_head):
    assert ray_head.state.unexpected() == []
    assert {(c.method, c.path) for c in ray_head.state.calls} >= {
        ("GET", "/-/healthz"),
        ("GET", "/api/serve/applications/"),
        ("PUT", "/api/serve/applications/"),
    }


def test_the_operator_holds_the_charts_service_account_token_not_the_admins(cluster, made):
    kubeconfig = json.loads((cluster.folder / "kuberay-operator.kubeconfig").read_text())
    token = kubeconfig["users"][0]["user"]["token"]
    review = cluster.api().request(
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
    )
    assert review["status"]["user"]["username"] == f"system:serviceaccount:{KUBERAY_NAMESPACE}:{KUBERAY_RELEASE}"


def test_the_operator_took_its_leader_lease_in_the_release_namespace(cluster, made):
    lease = cluster.api().get(f"/apis/coordination.k8s.io/v1/namespaces/{KUBERAY_NAMESPACE}/leases/ray-operator-leader")
    assert lease["spec"]["holderIdentity"]


def test_the_rayservice_carries_the_operators_finalizer(made):
    assert "ray.io/rayservice-finalizer" in made.service["metadata"]["finalizers"]


def test_ops_verify_passes_on_what_the_operator_made(cluster, made, dev_cfg):
    report = checks.verify_checks(dev_cfg, cluster)
    assert [(c.name, c.status) for c in report.checks] == [
        ("GPU nodes", "pass"),
        ("KubeRay operator", "pass"),
        ("RayService", "pass"),
    ]


def test_a_stage_on_another_operator_version_is_refused(tmp_path):
    cfg = config_with(tmp_path, addons={"kuberay_operator": "1.5.0"})
    assert session.versions_match(cfg) == (
        "the local cluster pins KubeRay v1.6.2 (tools/go/kuberay-operator/go.mod) and the stage installs 1.5.0 "
        "(addons.kuberay_operator)"
    )


def test_a_stage_on_another_kubernetes_minor_is_refused(tmp_path):
    cfg = config_with(tmp_path, cluster={"kubernetes_version": "1.34"})
    assert session.versions_match(cfg) == (
        "the local cluster builds Kubernetes v1.35.4 (tools/go/kubernetes/go.mod) and the stage runs 1.34 "
        "(cluster.kubernetes_version)"
    )


def test_the_proxy_refusal_is_read_from_the_go_command_output():
    output = (
        "go: github.com/x/y@v1.0.0: reading https://proxy.example/github.com/x/y/@v/v1.0.0.zip: "
        "403 Forbidden\n\tserver response: This module version is not available.\n"
    )
    assert tools.refusal(output) == (
        "go: github.com/x/y@v1.0.0: reading https://proxy.example/github.com/x/y/@v/"
        "v1.0.0.zip: 403 Forbidden server response: This module version is not available."
    )
    assert tools.refusal("go: build failed: undefined: x") is None
