"""The in-VPC verify runner: a CodeBuild project in the private subnets with a security group of its own
(out on 443 only), allowed to describe the cluster and mapped to a read-only Kubernetes group; its source bucket."""

from __future__ import annotations

import json

import pytest

from config.first_start import VERIFY_SETUP_MINUTES, first_start
from config.topology import VERIFY_GROUP


def _project(app_synth, stage="dev"):
    (project,) = [r["Properties"] for r in app_synth.resources(stage, "cluster", "AWS::CodeBuild::Project").values()]
    return project


def test_project_runs_ops_verify_for_its_stage(app_synth):
    project = _project(app_synth)
    assert project["Name"] == "pd-inference-dev-verify"
    spec = json.loads(project["Source"]["BuildSpec"])
    assert spec["phases"]["build"]["commands"] == ["/tmp/ops/bin/python -m ops verify --stage dev --wait 1800"]
    assert spec["phases"]["install"]["commands"][1] == (
        "/tmp/ops/bin/pip install --quiet --require-hashes --only-binary=:all: -r requirements-ops.lock"
    )


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_project_waits_for_its_stage_first_start_and_times_out_after(app_synth, stages, stage):
    """The wait is the stage's first start (config/first_start.py), the build's timeout that plus the set-up."""
    start = first_start(stages[stage])
    project = _project(app_synth, stage)
    command = json.loads(project["Source"]["BuildSpec"])["phases"]["build"]["commands"][0]
    assert command.endswith(f"--wait {start.verify_wait_s}")
    assert project["TimeoutInMinutes"] == start.verify_wait_s // 60 + VERIFY_SETUP_MINUTES


def _runner_group(app_synth, stage):
    """The runner's own security group: (logical id, properties)."""
    (found,) = [
        (name, res["Properties"])
        for name, res in app_synth.resources(stage, "cluster", "AWS::EC2::SecurityGroup").items()
        if "verify" in res["Properties"].get("GroupDescription", "")
    ]
    return found


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_project_is_in_the_private_subnets_with_a_security_group_of_its_own(app_synth, stage):
    vpc_config = _project(app_synth, stage)["VpcConfig"]
    group_id, _ = _runner_group(app_synth, stage)
    # not the cluster security group, which every node and pod is in and which admits all traffic from itself
    assert vpc_config["SecurityGroupIds"] == [{"Fn::GetAtt": [group_id, "GroupId"]}]
    assert len(vpc_config["Subnets"]) == 3
    assert all("privateSubnet" in s["Fn::ImportValue"] for s in vpc_config["Subnets"])


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_runner_group_goes_out_on_443_only_and_the_cluster_admits_it_on_443(app_synth, stage):
    group_id, group = _runner_group(app_synth, stage)
    cluster_id = next(iter(app_synth.resources(stage, "cluster", "AWS::EKS::Cluster")))
    cluster_group = {"Fn::GetAtt": [cluster_id, "ClusterSecurityGroupId"]}
    assert "SecurityGroupIngress" not in group
    egress = sorted(
        (
            rule["IpProtocol"],
            rule["FromPort"],
            rule["ToPort"],
            json.dumps(rule.get("CidrIp", rule.get("DestinationSecurityGroupId"))),
        )
        for rule in group["SecurityGroupEgress"]
    )
    assert egress == sorted([("tcp", 443, 443, json.dumps("0.0.0.0/0")), ("tcp", 443, 443, json.dumps(cluster_group))])
    ingress = [
        r["Properties"]
        for r in app_synth.resources(stage, "cluster", "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    assert [(i["GroupId"], i["IpProtocol"], i["FromPort"], i["ToPort"]) for i in ingress] == [
        (cluster_group, "tcp", 443, 443)
    ]


def _runner_statements(app_synth, stage="dev"):
    project = _project(app_synth, stage)
    role_id = project["ServiceRole"]["Fn::GetAtt"][0]
    role = app_synth.template(stage, "cluster")["Resources"][role_id]["Properties"]
    (policy,) = role["Policies"]
    return policy["PolicyDocument"]["Statement"]


def _actions(statement):
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else actions


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_runner_creates_and_deletes_interfaces_only_in_its_vpc(app_synth, stage):
    statements = _runner_statements(app_synth, stage)
    writes = ("ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface")
    for statement in statements:
        for action in writes:
            if action in _actions(statement):
                vpc = statement["Condition"]["ArnEquals"]["ec2:Vpc"]
                assert "vpc/" in json.dumps(vpc), statement
    assert {a for s in statements for a in _actions(s)} >= set(writes)
    (permission,) = [s for s in statements if "ec2:CreateNetworkInterfacePermission" in _actions(s)]
    assert permission["Condition"]["StringEquals"] == {"ec2:AuthorizedService": "codebuild.amazonaws.com"}
    assert len(permission["Condition"]["ArnEquals"]["ec2:Subnet"]) == 3
    # whatever stays on "*" is a describe call (no resource-level permissions) or ListMetrics
    for statement in statements:
        if statement["Resource"] == "*" and "Condition" not in statement:
            assert all(a.startswith(("ec2:Describe", "cloudwatch:List")) for a in _actions(statement)), statement


def test_runner_is_a_read_only_kubernetes_group_not_an_admin(app_synth):
    entries = [
        e["Properties"]
        for e in app_synth.resources("dev", "cluster", "AWS::EKS::AccessEntry").values()
        if e["Properties"].get("KubernetesGroups")
    ]
    assert len(entries) == 1
    assert entries[0]["KubernetesGroups"] == [VERIFY_GROUP]
    assert "AccessPolicies" not in entries[0]


def test_source_bucket_is_private_encrypted_and_short_lived(app_synth):
    (bucket,) = [r["Properties"] for r in app_synth.resources("dev", "cluster", "AWS::S3::Bucket").values()]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    # S3-managed keys: no KMS key to share, no KMS right an uploader would need (stacks/verify_runner.py)
    assert bucket["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    }
    assert bucket["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == 7
    (policy,) = app_synth.resources("dev", "cluster", "AWS::S3::BucketPolicy").values()
    assert {
        "Action": "s3:*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
    } in [{k: v for k, v in s.items() if k != "Resource"} for s in policy["Properties"]["PolicyDocument"]["Statement"]]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_runner_shares_no_key_of_the_cluster(app_synth, stage):
    # The EKS secrets key encrypts Kubernetes secrets only: not the runner's bucket or project, and the runner's
    # role (whoever can write its source runs code with it) may not use it, nor any other KMS key.
    resources = app_synth.template(stage, "cluster")["Resources"]
    (cluster,) = [r for r in resources.values() if r["Type"] == "AWS::EKS::Cluster"]
    secrets_key = cluster["Properties"]["EncryptionConfig"][0]["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    runner = {n: r for n, r in resources.items() if n.startswith("VerifyRunner")}
    assert secrets_key not in json.dumps(runner)
    assert "EncryptionKey" not in _project(app_synth, stage)
    (role,) = [r["Properties"] for r in runner.values() if r["Type"] == "AWS::IAM::Role"]
    actions = json.dumps([s["Action"] for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]])
    assert "kms:" not in actions


def test_runner_may_read_what_verifys_telemetry_check_reads_and_no_more(app_synth):
    (role,) = [
        r["Properties"]
        for r in app_synth.resources("dev", "cluster", "AWS::IAM::Role").values()
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
        == "codebuild.amazonaws.com"
    ]
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]

    def resources(action):  # CDK's policy minimizing may merge statements of the same resource
        return [
            s["Resource"]
            for s in statements
            if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        ]

    assert resources("cloudwatch:ListMetrics") == ["*"]  # no resource-level permissions exist for it
    (group_id,) = [
        logical
        for logical, r in app_synth.resources("dev", "cluster", "AWS::Logs::LogGroup").items()
        if r["Properties"].get("LogGroupName", "").endswith("/application")
    ]
    assert resources("logs:DescribeLogStreams") == [{"Fn::GetAtt": [group_id, "Arn"]}]


def test_project_carries_the_stages_tags_like_the_resources_cdk_tags(app_synth):
    # a plain CloudFormation resource: CDK's tagging does not reach it, so the runner writes them itself
    bucket_tags = next(iter(app_synth.resources("dev", "cluster", "AWS::S3::Bucket").values()))["Properties"]["Tags"]
    assert _project(app_synth)["Tags"] == [
        {"Key": "project", "Value": "pd-inference"},
        {"Key": "stage", "Value": "dev"},
    ]
    assert {(t["Key"], t["Value"]) for t in bucket_tags} >= {("project", "pd-inference"), ("stage", "dev")}
