"""ClusterStack: EKS (aws_eks_v2) with version, logging, KMS envelope encryption, endpoint access,
access entries and outputs, all from the stage file."""

from __future__ import annotations

import json

import pytest

from stacks.cluster import ALL_LOG_TYPES

from ..helpers import DELETE, config_with, synth

ALL_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


def _cluster(app_synth, stage):
    return app_synth.one(stage, "cluster", "AWS::EKS::Cluster")["Properties"]


def test_kubernetes_version_from_config(app_synth):
    assert _cluster(app_synth, "dev")["Version"] == "1.35"


def test_kubectl_layer_matches_the_cluster_version(app_synth):
    layers = app_synth.resources("dev", "cluster", "AWS::Lambda::LayerVersion").values()
    descriptions = [layer["Properties"].get("Description", "") for layer in layers]
    assert any("kubectl" in d and "1.35" in d for d in descriptions), descriptions


def test_no_auto_mode_and_no_default_capacity(app_synth):
    cluster = _cluster(app_synth, "dev")
    assert "ComputeConfig" not in cluster or cluster["ComputeConfig"].get("Enabled") is not True
    nodegroups = app_synth.resources("dev", "cluster", "AWS::EKS::Nodegroup").values()
    assert sorted(n["Properties"]["Labels"]["role"] for n in nodegroups) == ["gpu-worker", "system"]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_control_plane_logging_has_every_type(app_synth, stage):
    enabled = _cluster(app_synth, stage)["Logging"]["ClusterLogging"]["EnabledTypes"]
    assert sorted(t["Type"] for t in enabled) == sorted(ALL_TYPES)
    assert len(ALL_LOG_TYPES) == len(ALL_TYPES)


def test_control_plane_log_group_exists_first_with_retention(app_synth):
    group = app_synth.one("dev", "cluster", "AWS::Logs::LogGroup", LogGroupName="/aws/eks/pd-inference-dev/cluster")
    assert group["Properties"]["RetentionInDays"] == 30
    prod = app_synth.one("prod", "cluster", "AWS::Logs::LogGroup", LogGroupName="/aws/eks/pd-inference-prod/cluster")
    assert prod["Properties"]["RetentionInDays"] == 365


def test_secrets_are_envelope_encrypted_with_a_rotating_customer_key(app_synth):
    template = app_synth.template("dev", "cluster")
    keys = {
        name: r
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::KMS::Key" and r["Properties"]["Description"].startswith("EKS secrets envelope encryption")
    }
    assert len(keys) == 1
    ((key_id, key),) = keys.items()
    assert key["Properties"]["EnableKeyRotation"] is True
    encryption = _cluster(app_synth, "dev")["EncryptionConfig"]
    assert encryption == [{"Provider": {"KeyArn": {"Fn::GetAtt": [key_id, "Arn"]}}, "Resources": ["secrets"]}]


def test_dev_endpoint_is_public_only_from_the_allow_list_and_private(app_synth):
    vpc_config = _cluster(app_synth, "dev")["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is True
    assert vpc_config["PublicAccessCidrs"] == ["198.51.100.0/24"]
    assert vpc_config["EndpointPrivateAccess"] is True


def test_prod_endpoint_is_private_only(app_synth):
    vpc_config = _cluster(app_synth, "prod")["ResourcesVpcConfig"]
    assert vpc_config["EndpointPublicAccess"] is False
    assert vpc_config["EndpointPrivateAccess"] is True


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_no_stage_has_an_unrestricted_public_endpoint(app_synth, stage):
    # cdk-nag's EKS rules do not fire on aws_eks_v2, so this is checked here.
    vpc_config = _cluster(app_synth, stage)["ResourcesVpcConfig"]
    if vpc_config.get("EndpointPublicAccess"):
        assert vpc_config.get("PublicAccessCidrs"), "public endpoint without an allow-list is open to 0.0.0.0/0"
        assert "0.0.0.0/0" not in vpc_config["PublicAccessCidrs"]


def test_authentication_is_access_entries(app_synth):
    assert _cluster(app_synth, "dev")["AccessConfig"]["AuthenticationMode"] == "API"


def test_outputs_name_the_cluster_the_gpu_az_and_the_kubeconfig_command(app_synth):
    outputs = app_synth.template("dev", "cluster")["Outputs"]
    values = {name: out["Value"] for name, out in outputs.items()}
    assert {"ClusterName", "GpuAvailabilityZone", "UpdateKubeconfigCommand"} <= set(values)
    assert values["GpuAvailabilityZone"] == "us-west-2a"
    assert values["UpdateKubeconfigCommand"] == "aws eks update-kubeconfig --name pd-inference-dev --region us-west-2"


@pytest.fixture(scope="module")
def with_admins(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("admins")
    cfg = config_with(
        tmp,
        cluster={
            "allow_no_admin_principals": False,
            "admin_principal_arns": [
                "arn:aws:iam::123456789012:role/PlatformAdmin",
                "arn:aws:iam::123456789012:user/alice",
            ],
        },
    )
    return synth([cfg], tmp / "out")


def test_access_entries_grant_cluster_admin_to_each_configured_principal(with_admins):
    entries = with_admins.resources("dev", "cluster", "AWS::EKS::AccessEntry").values()
    # the other entry is the kubectl provider's own role (a GetAtt), which CDK adds
    by_principal = {
        e["Properties"]["PrincipalArn"]: e["Properties"]
        for e in entries
        if isinstance(e["Properties"]["PrincipalArn"], str)
    }
    assert len(by_principal) == 2
    for arn in ("arn:aws:iam::123456789012:role/PlatformAdmin", "arn:aws:iam::123456789012:user/alice"):
        policies = by_principal[arn]["AccessPolicies"]
        assert len(policies) == 1
        assert policies[0]["AccessScope"] == {"Type": "cluster"}
        assert json.dumps(policies[0]["PolicyArn"]).endswith('AmazonEKSClusterAdminPolicy"]]}')


@pytest.mark.parametrize(("stage", "support"), [("dev", "STANDARD"), ("prod", "EXTENDED")])
def test_the_support_policy_is_the_stage_files_not_ekss_default(app_synth, stage, support):
    # AWS::EKS::Cluster UpgradePolicy defaults to EXTENDED (billed once standard support ends): always written.
    (cluster,) = app_synth.resources(stage, "cluster", "AWS::EKS::Cluster").values()
    assert cluster["Properties"]["UpgradePolicy"] == {"SupportType": support}


def test_without_the_key_the_template_says_extended_all_the_same(tmp_path):
    cfg = config_with(tmp_path, cluster={"support_type": DELETE})
    assert cfg.cluster.support_type == "extended"
    (cluster,) = synth([cfg], tmp_path / "out").resources("dev", "cluster", "AWS::EKS::Cluster").values()
    assert cluster["Properties"]["UpgradePolicy"] == {"SupportType": "EXTENDED"}
