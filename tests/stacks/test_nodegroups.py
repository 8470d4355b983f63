"""The system and GPU nodegroups and their launch templates (reference: docs/STAGE_FILE.md, `system_nodegroup`
and `gpu_nodegroup`; docs/DECISIONS.md, "The GPU instance type is in the launch template")."""

from __future__ import annotations

import pytest

from config.first_start import system_root_volume_floor_gib

from ..helpers import config_with, synth


def _nodegroup(app_synth, stage, role):
    groups = [
        g
        for g in app_synth.resources(stage, "cluster", "AWS::EKS::Nodegroup").values()
        if g["Properties"]["Labels"] == {"role": role}
    ]
    assert len(groups) == 1
    return groups[0]["Properties"]


def _launch_template(app_synth, stage, nodegroup):
    logical_id = nodegroup["LaunchTemplate"]["Id"]["Ref"]
    return app_synth.template(stage, "cluster")["Resources"][logical_id]["Properties"]["LaunchTemplateData"]


def _subnet_azs(app_synth, stage, subnets):
    """Resolve the nodegroup's imported subnet ids to the network stack's subnets and their AZs."""
    network = app_synth.template(stage, "network")["Resources"]
    azs = []
    for subnet in subnets:
        export = subnet["Fn::ImportValue"]
        logical = next(name for name in network if name in export and network[name]["Type"] == "AWS::EC2::Subnet")
        props = network[logical]["Properties"]
        azs.append((props["AvailabilityZone"], props["MapPublicIpOnLaunch"]))
    return azs


def test_system_nodegroup_is_al2023_standard_m7i_xlarge_labelled_system(app_synth):
    group = _nodegroup(app_synth, "dev", "system")
    assert group["AmiType"] == "AL2023_x86_64_STANDARD"
    assert group["InstanceTypes"] == ["m7i.xlarge"]
    assert group["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 1, "MaxSize": 2}
    assert "Taints" not in group


def test_prod_system_nodegroup_sizes_from_config(app_synth):
    group = _nodegroup(app_synth, "prod", "system")
    assert group["InstanceTypes"] == ["m7i.2xlarge"]
    assert group["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 4}


def test_gpu_nodegroup_is_two_g6_8xlarge_on_the_nvidia_ami(app_synth):
    group = _nodegroup(app_synth, "dev", "gpu-worker")
    assert group["AmiType"] == "AL2023_x86_64_NVIDIA"
    # the GPU type lives in the launch template (see nodegroups.py), so not on the nodegroup too
    assert _launch_template(app_synth, "dev", group)["InstanceType"] == "g6.8xlarge"
    assert "InstanceTypes" not in group
    assert group["CapacityType"] == "ON_DEMAND"
    assert group["ScalingConfig"] == {"MinSize": 2, "DesiredSize": 2, "MaxSize": 2}  # min = desired = max = count


def test_gpu_nodegroup_is_tainted(app_synth):
    group = _nodegroup(app_synth, "dev", "gpu-worker")
    assert group["Taints"] == [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NO_SCHEDULE"}]


@pytest.mark.parametrize("stage, zone", [("dev", "us-west-2a"), ("prod", "us-west-2b")])
def test_gpu_nodegroup_has_exactly_one_private_subnet_in_the_gpu_az(app_synth, stage, zone):
    group = _nodegroup(app_synth, stage, "gpu-worker")
    assert _subnet_azs(app_synth, stage, group["Subnets"]) == [(zone, False)]


def test_system_nodegroup_spans_every_private_subnet(app_synth, stages):
    group = _nodegroup(app_synth, "dev", "system")
    azs = _subnet_azs(app_synth, "dev", group["Subnets"])
    assert sorted(azs) == [(zone, False) for zone in stages["dev"].availability_zones]


@pytest.mark.parametrize("role", ["system", "gpu-worker"])
def test_launch_templates_require_imdsv2_with_hop_limit_1(app_synth, role):
    # Hop limit 1: IMDS answers never reach a pod's network namespace, so a pod that stays in its own
    # cannot read the node role's credentials (hop limit 2 let every pod do so). A privileged pod is root on
    # its node and can still ask from the node's namespace (SECURITY.md).
    for stage in ("dev", "prod"):
        data = _launch_template(app_synth, stage, _nodegroup(app_synth, stage, role))
        assert data["MetadataOptions"] == {
            "HttpEndpoint": "enabled",
            "HttpTokens": "required",
            "HttpPutResponseHopLimit": 1,
        }


@pytest.mark.parametrize("stage, size", [("dev", 200), ("prod", 300)])
def test_gpu_root_volume_is_encrypted_gp3_of_configured_size(app_synth, stage, size):
    data = _launch_template(app_synth, stage, _nodegroup(app_synth, stage, "gpu-worker"))
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": size, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }
    ]


def test_system_root_volume_default_holds_two_serving_images(app_synth, stages):
    data = _launch_template(app_synth, "dev", _nodegroup(app_synth, "dev", "system"))
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 100
    assert stages["dev"].system_nodegroup.root_volume_gib == 100 >= system_root_volume_floor_gib()


@pytest.mark.parametrize("role", ["system", "gpu-worker"])
def test_instance_type_in_exactly_one_place_and_ami_type_on_the_nodegroup(app_synth, role):
    group = _nodegroup(app_synth, "dev", role)
    data = _launch_template(app_synth, "dev", group)
    assert ("InstanceType" in data) != ("InstanceTypes" in group)
    assert "ImageId" not in data and group["AmiType"].startswith("AL2023_x86_64_")
    assert "DiskSize" not in group  # disk size + launch template is an EKS error
    assert group["LaunchTemplate"]["Version"]["Fn::GetAtt"][1] == "LatestVersionNumber"


def test_no_ssh_access_on_any_nodegroup(app_synth):
    for group in app_synth.resources("prod", "cluster", "AWS::EKS::Nodegroup").values():
        assert "RemoteAccess" not in group["Properties"]


def test_placement_group_only_when_configured(app_synth):
    assert app_synth.resources("dev", "cluster", "AWS::EC2::PlacementGroup") == {}
    ((pg_id, pg),) = app_synth.resources("prod", "cluster", "AWS::EC2::PlacementGroup").items()
    assert pg["Properties"]["Strategy"] == "cluster"
    data = _launch_template(app_synth, "prod", _nodegroup(app_synth, "prod", "gpu-worker"))
    assert data["Placement"] == {"GroupName": {"Ref": pg_id}}


@pytest.fixture(scope="module")
def spot_without_efa(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spot")
    cfg = config_with(
        tmp,
        gpu_nodegroup={
            "instance_type": "g6.4xlarge",
            "efa": False,
            "capacity_type": "spot",
            "count": 2,
            "min_size": 1,
            "max_size": 3,
        },
        serving={"kv_backend": "UCX", "kv_transfer_floor_gbps": 1},
    )
    return synth([cfg], tmp / "out")


def test_spot_capacity_and_separate_min_max(spot_without_efa):
    group = _nodegroup(spot_without_efa, "dev", "gpu-worker")
    assert group["CapacityType"] == "SPOT"
    assert group["ScalingConfig"] == {"MinSize": 1, "DesiredSize": 2, "MaxSize": 3}
