"""Cluster and node hardening beyond cdk-nag, over every template of every stage: IMDSv2, encrypted
volumes, no SSH, least-privilege key policies, log retention everywhere, the VPC CNI's network policy
agent, and an explicit, warned opt-in for an endpoint open to the internet."""

from __future__ import annotations

import json

from ..helpers import config_with, synth

STACKS = ("network", "cluster", "serving")


def _all(app_synth, kind):
    for stage in ("dev", "prod"):
        for stack in STACKS:
            for name, res in app_synth.resources(stage, stack, kind).items():
                yield f"{stage}/{stack}/{name}", res["Properties"]


def test_imdsv2_required_on_every_launch_template(app_synth):
    templates = list(_all(app_synth, "AWS::EC2::LaunchTemplate"))
    assert len(templates) == 4
    for name, props in templates:
        assert props["LaunchTemplateData"]["MetadataOptions"]["HttpTokens"] == "required", name


def test_every_ebs_volume_is_encrypted(app_synth):
    for name, props in _all(app_synth, "AWS::EC2::LaunchTemplate"):
        for mapping in props["LaunchTemplateData"]["BlockDeviceMappings"]:
            assert mapping["Ebs"]["Encrypted"] is True, name


def test_no_ssh_on_any_nodegroup(app_synth):
    for name, props in _all(app_synth, "AWS::EKS::Nodegroup"):
        assert "RemoteAccess" not in props, name


def test_every_log_group_has_a_retention_and_a_key(app_synth):
    groups = list(_all(app_synth, "AWS::Logs::LogGroup"))
    assert len(groups) >= 12
    for name, props in groups:
        assert props.get("RetentionInDays"), name
        assert "KmsKeyId" in props, name


def test_every_lambda_function_logs_into_a_managed_group(app_synth):
    for stage in ("dev", "prod"):
        for stack in STACKS:
            template = app_synth.template(stage, stack)["Resources"]
            for name, res in template.items():
                if res["Type"] == "AWS::Lambda::Function":
                    group = res["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
                    assert template[group]["Type"] == "AWS::Logs::LogGroup", name


def test_key_policies_grant_services_only_with_conditions(app_synth):
    keys = list(_all(app_synth, "AWS::KMS::Key"))
    assert len(keys) == 4  # per stage: the secrets key and the logs key
    for name, props in keys:
        assert props["EnableKeyRotation"] is True, name
        for statement in props["KeyPolicy"]["Statement"]:
            principal = statement["Principal"]
            assert principal != "*" and principal != {"AWS": "*"}, name
            if "Service" in principal:  # a service may use the key only for this account's resources
                assert "Condition" in statement, (name, statement)
            else:  # the account itself (CDK's default administration statement)
                assert json.dumps(principal["AWS"]).endswith(':root"]]}'), (name, principal)


def test_vpc_cni_runs_its_network_policy_agent(app_synth):
    (addon,) = [p for _, p in _all(app_synth, "AWS::EKS::Addon") if p["AddonName"] == "vpc-cni"][:1]
    assert json.loads(addon["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert addon["ResolveConflicts"] == "OVERWRITE"


def test_open_endpoint_needs_the_flag_and_warns(tmp_path):
    cfg = config_with(
        tmp_path, cluster={"endpoint": {"public_access_cidrs": ["0.0.0.0/0"], "allow_public_internet": True}}
    )
    result = synth([cfg], tmp_path / "out")
    warnings = [
        str(e.data)
        for c in result.stages["dev"].node.find_all()
        for e in c.node.metadata
        if e.type == "aws:cdk:warning"
    ]
    assert len(warnings) == 1 and "open to more than a /8 of the internet (0.0.0.0/0)" in warnings[0]
    vpc_config = result.one("dev", "cluster", "AWS::EKS::Cluster")["Properties"]["ResourcesVpcConfig"]
    assert vpc_config["PublicAccessCidrs"] == ["0.0.0.0/0"]


def test_an_endpoint_opened_in_pieces_warns_too(tmp_path):
    # Two halves of the address space are the whole internet: the warning judges the union
    # (config.derived.endpoint_wide_open), not a literal /0.
    cfg = config_with(
        tmp_path,
        cluster={"endpoint": {"public_access_cidrs": ["0.0.0.0/1", "128.0.0.0/1"], "allow_public_internet": True}},
    )
    result = synth([cfg], tmp_path / "out")
    warnings = [
        str(e.data)
        for c in result.stages["dev"].node.find_all()
        for e in c.node.metadata
        if e.type == "aws:cdk:warning"
    ]
    assert len(warnings) == 1 and "0.0.0.0/1, 128.0.0.0/1" in warnings[0]
