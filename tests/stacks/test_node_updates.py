"""A version update of the GPU nodegroup launches no instance beyond the group's size: UpdateStrategy
MINIMAL (EKS terminates an old node before launching its replacement) one node at a time. The system
nodegroup keeps EKS's default update (new nodes first), whose surge docs/OPERATIONS.md ("Nodegroup updates")
counts. Sources in stacks/nodegroups.py (GPU_UPDATE_STRATEGY)."""

from __future__ import annotations

import pytest


def _nodegroup(app_synth, stage, role):
    (group,) = [
        g["Properties"]
        for g in app_synth.resources(stage, "cluster", "AWS::EKS::Nodegroup").values()
        if g["Properties"]["Labels"] == {"role": role}
    ]
    return group


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_gpu_nodegroup_updates_terminate_before_they_launch_one_node_at_a_time(app_synth, stage):
    assert _nodegroup(app_synth, stage, "gpu-worker").get("UpdateConfig") == {
        "MaxUnavailable": 1,
        "UpdateStrategy": "MINIMAL",
    }


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_system_nodegroup_keeps_the_default_update_that_docs_count(app_synth, stage):
    # No UpdateConfig: EKS's DEFAULT strategy with maxUnavailable 1 (docs/OPERATIONS.md gives its surge).
    assert "UpdateConfig" not in _nodegroup(app_synth, stage, "system")
