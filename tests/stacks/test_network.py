"""NetworkStack: VPC over the stage's AZs, public and private subnets, NAT count, flow logs, closed default SG."""

from __future__ import annotations

import ipaddress
import json

import pytest


def test_vpc_uses_the_stage_cidr(app_synth):
    vpc = app_synth.one("dev", "network", "AWS::EC2::VPC")
    assert vpc["Properties"]["CidrBlock"] == "10.0.0.0/16"
    assert vpc["Properties"]["EnableDnsHostnames"] is True  # private endpoint access needs DNS hostnames


def _groups(app_synth, stage):
    groups = {}
    for subnet in app_synth.resources(stage, "network", "AWS::EC2::Subnet").values():
        tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
        groups.setdefault(tags["aws-cdk:subnet-name"], []).append(subnet["Properties"])
    return groups


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_public_private_and_control_plane_subnet_in_each_stage_az(app_synth, stages, stage):
    groups = _groups(app_synth, stage)
    assert sorted(groups) == ["control-plane", "private", "public"]
    for name, subnets in groups.items():
        # AZ names are literals from the stage file: no lookup, so synth needs no credentials.
        assert sorted(s["AvailabilityZone"] for s in subnets) == sorted(stages[stage].availability_zones)
        assert all(s["MapPublicIpOnLaunch"] is (name == "public") for s in subnets)


def test_control_plane_subnets_are_small_and_separate_from_the_pods(app_synth):
    groups = _groups(app_synth, "dev")
    assert {s["CidrBlock"].split("/")[1] for s in groups["control-plane"]} == {"28"}
    assert {s["CidrBlock"].split("/")[1] for s in groups["private"]} == {"19"}


@pytest.mark.parametrize("stage, count", [("dev", 1), ("prod", 3)])
def test_nat_gateway_count_comes_from_config(app_synth, stage, count):
    assert len(app_synth.resources(stage, "network", "AWS::EC2::NatGateway")) == count


def test_flow_logs_capture_all_traffic_to_a_log_group_with_retention(app_synth):
    flow = app_synth.one("dev", "network", "AWS::EC2::FlowLog")["Properties"]
    assert flow["TrafficType"] == "ALL" and flow["ResourceType"] == "VPC"
    assert flow["LogDestinationType"] == "cloud-watch-logs"
    group_id = flow["LogGroupName"]["Ref"]
    group = app_synth.template("dev", "network")["Resources"][group_id]["Properties"]
    assert group["RetentionInDays"] == 30 and "KmsKeyId" in group


def test_default_security_group_is_restricted(app_synth):
    restrict = app_synth.resources("dev", "network", "Custom::VpcRestrictDefaultSG")
    assert len(restrict) == 1


ELB_ROLES = ("kubernetes.io/role/elb", "kubernetes.io/role/internal-elb")
# The subnet group -> the load-balancer role tag it carries (None: neither).
LOAD_BALANCER_ROLE = {
    "public": "kubernetes.io/role/elb",
    "private": "kubernetes.io/role/internal-elb",
    "control-plane": None,
}


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_subnets_are_tagged_for_load_balancers(app_synth, stage):
    subnets = app_synth.resources(stage, "network", "AWS::EC2::Subnet").values()
    for subnet in subnets:
        tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
        role = LOAD_BALANCER_ROLE[tags["aws-cdk:subnet-name"]]
        assert {k: tags[k] for k in ELB_ROLES if k in tags} == ({role: "1"} if role else {})


def _trusted_cidrs(app_synth, stage):
    """Every ipBlock CIDR a NetworkPolicy of the stage admits (the API server proxy's subnets)."""
    (manifest,) = app_synth.resources(stage, "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
    policies = [o for o in json.loads(manifest["Properties"]["Manifest"]) if o["kind"] == "NetworkPolicy"]
    return {
        peer["ipBlock"]["cidr"]
        for policy in policies
        for rule in policy["spec"].get("ingress", [])
        for peer in rule.get("from", [])
        if "ipBlock" in peer
    }


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_no_subnet_the_network_policies_trust_may_hold_a_load_balancer(app_synth, stage):
    # A load balancer in a trusted subnet would reach Serve and the dashboard as the "API server proxy".
    trusted = [ipaddress.ip_network(cidr) for cidr in _trusted_cidrs(app_synth, stage)]
    assert trusted
    subnets = [s["Properties"] for s in app_synth.resources(stage, "network", "AWS::EC2::Subnet").values()]
    inside = [s for s in subnets if any(ipaddress.ip_network(s["CidrBlock"]).overlaps(t) for t in trusted)]
    assert sorted(s["CidrBlock"] for s in inside) == sorted(str(t) for t in trusted)  # exactly those subnets
    for subnet in inside:
        tags = {t["Key"] for t in subnet["Tags"]}
        assert not tags & set(ELB_ROLES), f"{subnet['CidrBlock']} is trusted by the NetworkPolicies and tagged {tags}"


def test_stage_tags_reach_the_resources(app_synth):
    vpc = app_synth.one("prod", "network", "AWS::EC2::VPC")
    tags = {t["Key"]: t["Value"] for t in vpc["Properties"]["Tags"]}
    assert tags["project"] == "pd-inference" and tags["stage"] == "prod"


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_image_layers_reach_s3_through_a_gateway_endpoint_not_the_nat(app_synth, stage):
    # ECR serves layers from S3: the private (node) subnets route S3 to a gateway endpoint.
    resources = app_synth.template(stage, "network")["Resources"]
    (endpoint,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::VPCEndpoint"]
    assert endpoint.get("VpcEndpointType", "Gateway") == "Gateway"
    assert ".s3" in json.dumps(endpoint["ServiceName"])
    private_tables = {
        name
        for name, r in resources.items()
        if r["Type"] == "AWS::EC2::RouteTable" and name.startswith("VpcprivateSubnet")
    }
    assert private_tables and private_tables <= {ref["Ref"] for ref in endpoint["RouteTableIds"]}
