"""ops/diff/template_notes.py on dev's real cluster template (the session's synth) and an edited copy of it: the
nodegroups a Kubernetes upgrade leaves behind, who gains or loses cluster access, and a scale-in's nodes."""

from __future__ import annotations

import copy

import pytest

from ops.diff import template_notes

OTHER_ADMIN = "arn:aws:iam::111122223333:role/PlatformAdmin"
ADMIN_POLICY = {
    "AccessScope": {"Type": "cluster"},
    "PolicyArn": {
        "Fn::Join": [
            "",
            ["arn:", {"Ref": "AWS::Partition"}, ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"],
        ]
    },
}


@pytest.fixture
def cluster(app_synth) -> dict:
    """A copy of dev's cluster template, to edit into the base or the head side."""
    return copy.deepcopy(app_synth.template("dev", "cluster"))


def _edited(template: dict, kind: str, change) -> dict:
    edited = copy.deepcopy(template)
    for resource in edited["Resources"].values():
        if resource["Type"] == kind:
            change(resource["Properties"])
    return edited


def _with_admins(template: dict, *arns: str) -> dict:
    edited = copy.deepcopy(template)
    for index, arn in enumerate(arns):
        edited["Resources"][f"ClusterAdmin{index}"] = {
            "Type": "AWS::EKS::AccessEntry",
            "Properties": {"AccessPolicies": [ADMIN_POLICY], "ClusterName": {"Ref": "x"}, "PrincipalArn": arn},
        }
    return edited


def _version(template: dict, version: str) -> dict:
    return _edited(template, "AWS::EKS::Cluster", lambda props: props.update(Version=version))


def test_an_upgrade_leaves_both_nodegroups_on_the_old_kubelet_with_the_command_to_update_them(cluster):
    (step,) = template_notes.nodegroups_behind(_version(cluster, "1.34"), _version(cluster, "1.35"))
    assert step.startswith(
        "Kubernetes 1.34 -> 1.35: the nodegroups ClusterNodegroupGpuNodegroup8D13555C, "
        "ClusterNodegroupSystemNodegroupBF67F25F stay on 1.34's kubelet (the template sets no nodegroup version)"
    )
    assert (
        "`aws eks update-nodegroup-version --cluster-name pd-inference-dev --nodegroup-name NAME "
        "--kubernetes-version 1.35`" in step
    )


def test_a_nodegroup_that_names_the_new_version_follows_the_cluster(cluster):
    head = _edited(_version(cluster, "1.35"), "AWS::EKS::Nodegroup", lambda props: props.update(Version="1.35"))
    assert template_notes.nodegroups_behind(_version(cluster, "1.34"), head) == []


@pytest.mark.parametrize("before, after", [("1.35", "1.35"), ("1.35", "1.34")])
def test_no_nodegroup_step_without_an_upgrade(cluster, before, after):
    assert template_notes.nodegroups_behind(_version(cluster, before), _version(cluster, after)) == []


def test_a_new_admin_of_another_account_is_named_with_its_policy_and_account(cluster):
    notes = template_notes.access_changes(cluster, _with_admins(cluster, OTHER_ADMIN), "123456789012")
    assert notes == [
        (
            f"cluster access added: {OTHER_ADMIN} gets AmazonEKSClusterAdminPolicy (cluster scope); account "
            f"111122223333 is not the stage's (123456789012)"
        )
    ]


def test_a_new_admin_of_the_stages_account_has_no_account_remark(cluster):
    notes = template_notes.access_changes(cluster, _with_admins(cluster, OTHER_ADMIN), "111122223333")
    assert notes == [f"cluster access added: {OTHER_ADMIN} gets AmazonEKSClusterAdminPolicy (cluster scope)"]


def test_a_stage_without_an_account_says_it_cannot_compare(cluster):
    (note,) = template_notes.access_changes(cluster, _with_admins(cluster, OTHER_ADMIN), None)
    assert note.endswith("; the stage sets no account: check that 111122223333 is the one it deploys to")


def test_removing_the_first_admin_is_one_removal_not_a_change_of_the_second(cluster):
    second = "arn:aws:iam::123456789012:role/Oncall"
    before, after = _with_admins(cluster, OTHER_ADMIN, second), _with_admins(cluster, second)
    assert template_notes.access_changes(before, after, "123456789012") == [
        f"cluster access removed: {OTHER_ADMIN} loses AmazonEKSClusterAdminPolicy (cluster scope)"
    ]


def test_an_entry_of_this_stacks_own_role_is_named_by_its_logical_id(cluster):
    before = copy.deepcopy(cluster)
    del before["Resources"]["VerifyRunnerAccessA9FE8DCB"]
    (note,) = template_notes.access_changes(before, cluster, None)
    assert note.startswith("cluster access added: role VerifyRunnerRole")
    assert note.endswith(" of this stack gets Kubernetes groups pd-inference-verify")


def _desired(template: dict, size: int) -> dict:
    def change(props: dict) -> None:
        if props["Labels"]["role"] == "gpu-worker":
            props["ScalingConfig"].update(DesiredSize=size, MinSize=size, MaxSize=size)

    return _edited(template, "AWS::EKS::Nodegroup", change)


def test_a_gpu_scale_in_says_eks_picks_the_nodes(cluster):
    (note,) = template_notes.scale_ins(_desired(cluster, 3), _desired(cluster, 2))
    assert note.startswith(
        "nodegroup ClusterNodegroupGpuNodegroup8D13555C (role=gpu-worker): 3 -> 2 node(s): EKS, not you, picks "
        "which 1 node(s) it terminates (the Auto Scaling group's termination policy), perhaps ones running a "
        "live engine"
    )


def test_a_scale_out_has_no_note(cluster):
    assert template_notes.scale_ins(_desired(cluster, 2), _desired(cluster, 3)) == []
