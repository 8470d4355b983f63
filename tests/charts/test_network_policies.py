"""NetworkPolicies: what the flow matrix (test_network_flows.py) does not show by itself."""

from __future__ import annotations

import json


def test_policies_select_the_labels_the_ray_pods_carry(app_synth):
    # The policies select `app.kubernetes.io/part-of: <service>`, a label of our pod templates that
    # KubeRay copies onto the pods and never overrides (common/pod.go); ray.io/cluster changes with
    # every new RayCluster, so it cannot be selected on.
    (manifest,) = app_synth.resources("dev", "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
    objects = json.loads(manifest["Properties"]["Manifest"])
    (ray_service,) = [o for o in objects if o["kind"] == "RayService"]
    cluster = ray_service["spec"]["rayClusterConfig"]
    for group in (cluster["headGroupSpec"], *cluster["workerGroupSpecs"]):
        assert group["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "ray-llm"
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert {p["metadata"]["namespace"] for p in policies} == {"inference"}
    for policy in policies:
        selected = policy["spec"]["podSelector"].get("matchLabels", {})
        assert "ray.io/cluster" not in selected and "ray.io/serve" not in selected
