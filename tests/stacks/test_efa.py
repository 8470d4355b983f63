"""EFA wiring: interfaces derived from the instance type, the self-referencing security group, the
cluster security group on every interface, no subnet and no public IP in the launch template."""

from __future__ import annotations

import pytest

from config.instance_types import INSTANCE_TYPES

from ..helpers import config_with, synth


def _gpu_template(result, stage="dev"):
    groups = [
        g["Properties"]
        for g in result.resources(stage, "cluster", "AWS::EKS::Nodegroup").values()
        if g["Properties"]["Labels"] == {"role": "gpu-worker"}
    ]
    logical_id = groups[0]["LaunchTemplate"]["Id"]["Ref"]
    return result.template(stage, "cluster")["Resources"][logical_id]["Properties"]["LaunchTemplateData"]


def _efa_group_id(result, stage="dev"):
    groups = {
        name: r
        for name, r in result.resources(stage, "cluster", "AWS::EC2::SecurityGroup").items()
        if name.startswith("EfaSecurityGroup")
    }
    assert len(groups) == 1
    return next(iter(groups))


def test_g6_8xlarge_gets_exactly_one_efa_interface_on_card_0(app_synth):
    interfaces = _gpu_template(app_synth)["NetworkInterfaces"]
    assert len(interfaces) == INSTANCE_TYPES["g6.8xlarge"].efa_interfaces == 1
    interface = interfaces[0]
    assert interface["InterfaceType"] == "efa"
    assert interface["DeviceIndex"] == 0 and interface["NetworkCardIndex"] == 0


def test_interfaces_carry_the_efa_and_the_cluster_security_group(app_synth):
    efa_sg = _efa_group_id(app_synth)
    cluster_id = next(iter(app_synth.resources("dev", "cluster", "AWS::EKS::Cluster")))
    for interface in _gpu_template(app_synth)["NetworkInterfaces"]:
        assert interface["Groups"] == [
            {"Fn::GetAtt": [efa_sg, "GroupId"]},
            {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]},
        ]


def test_launch_template_names_no_subnet_and_no_public_ip(app_synth):
    data = _gpu_template(app_synth)
    for interface in data["NetworkInterfaces"]:
        assert "SubnetId" not in interface
        assert interface["AssociatePublicIpAddress"] is False
    assert "SecurityGroupIds" not in data  # only on the interfaces


def test_efa_security_group_allows_all_traffic_to_and_from_itself_only(app_synth):
    efa_sg = _efa_group_id(app_synth)
    group = app_synth.template("dev", "cluster")["Resources"][efa_sg]["Properties"]
    self_ref = {"Fn::GetAtt": [efa_sg, "GroupId"]}
    ingress = [
        r["Properties"]
        for r in app_synth.resources("dev", "cluster", "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == self_ref
    ]
    egress = [
        r["Properties"]
        for r in app_synth.resources("dev", "cluster", "AWS::EC2::SecurityGroupEgress").values()
        if r["Properties"]["GroupId"] == self_ref
    ]
    assert [(r["IpProtocol"], r["SourceSecurityGroupId"]) for r in ingress] == [("-1", self_ref)]
    assert [(r["IpProtocol"], r["DestinationSecurityGroupId"]) for r in egress] == [("-1", self_ref)]
    assert "SecurityGroupIngress" not in group
    # no inline egress to 0.0.0.0/0: allow_all_outbound=False leaves only CDK's "disallow all" placeholder
    assert all(rule["CidrIp"] == "255.255.255.255/32" for rule in group.get("SecurityGroupEgress", []))


@pytest.mark.parametrize("instance_type, count", [("p4d.24xlarge", 4), ("p5.48xlarge", 32)])
def test_interface_count_follows_the_instance_type(instance_type, count, tmp_path):
    # Qwen3.5 on an H100 (p5) needs the Triton GDN prefill kernel (config/rules/serving_engine.py gdn_prefill_kernel).
    cfg = config_with(
        tmp_path, gpu_nodegroup={"instance_type": instance_type}, serving={"engine": {"gdn_prefill_backend": "triton"}}
    )
    result = synth([cfg], tmp_path / "out")
    interfaces = _gpu_template(result)["NetworkInterfaces"]
    assert [i["NetworkCardIndex"] for i in interfaces] == list(range(count))
    assert [i["DeviceIndex"] for i in interfaces] == [0] + [1] * (count - 1)
    assert {i["InterfaceType"] for i in interfaces} == {"efa"}


def test_without_efa_no_interfaces_and_no_efa_security_group(tmp_path):
    cfg = config_with(
        tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_backend": "UCX", "kv_transfer_floor_gbps": 1}
    )
    result = synth([cfg], tmp_path / "out")
    assert "NetworkInterfaces" not in _gpu_template(result)
    assert not [n for n in result.resources("dev", "cluster", "AWS::EC2::SecurityGroup") if n.startswith("Efa")]
