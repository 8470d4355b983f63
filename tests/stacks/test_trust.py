"""Every role that EKS Pod Identity may assume trusts it for one service account of one cluster only: the
statement that names pods.eks.amazonaws.com allows sts:AssumeRole and sts:TagSession under StringEquals on
the session tags EKS Pod Identity sets (aws:RequestTag/eks-cluster-arn = this cluster's ARN, which holds the
account; kubernetes-namespace and kubernetes-service-account = those of the role's association). Sources in
stacks/observability.py (pod_identity_principal)."""

from __future__ import annotations

import pytest

POD_IDENTITY = {"Service": "pods.eks.amazonaws.com"}


def _actions(statement: dict) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def pod_identity_roles(template: dict) -> dict[str, list[dict]]:
    """Role logical id -> the trust statements that name EKS Pod Identity."""
    roles = {
        name: r["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        for name, r in template["Resources"].items()
        if r["Type"] == "AWS::IAM::Role"
    }
    return {
        name: [s for s in trust if s["Principal"] == POD_IDENTITY]
        for name, trust in roles.items()
        if any(s["Principal"] == POD_IDENTITY for s in trust)
    }


def association_of(template: dict, role: str) -> dict:
    (association,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
        and r["Properties"]["RoleArn"] == {"Fn::GetAtt": [role, "Arn"]}
    ]
    return association


def trust_problems(template: dict, role: str, cluster_arn) -> list[str]:
    """What is wrong with `role`'s Pod Identity trust, [] when it is scoped to `cluster_arn` and the service
    account of its association."""
    association = association_of(template, role)
    expected = {
        "aws:RequestTag/eks-cluster-arn": cluster_arn,
        "aws:RequestTag/kubernetes-namespace": association["Namespace"],
        "aws:RequestTag/kubernetes-service-account": association["ServiceAccount"],
    }
    problems = []
    for statement in pod_identity_roles(template)[role]:
        if _actions(statement) != {"sts:AssumeRole", "sts:TagSession"}:
            problems.append(f"{role}: {sorted(_actions(statement))} in one statement, not AssumeRole + TagSession")
        if statement.get("Condition") != {"StringEquals": expected}:
            problems.append(f"{role}: condition {statement.get('Condition')}, expected StringEquals {expected}")
    return problems


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_cloudwatch_agents_role_trusts_only_its_service_account_on_this_cluster(app_synth, stage):
    template = app_synth.template(stage, "cluster")
    (cluster,) = [n for n, r in template["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    roles = pod_identity_roles(template)
    assert len(roles) == 1  # the CloudWatch agents' (observability is on in both stages)
    for role in roles:
        assert trust_problems(template, role, {"Fn::GetAtt": [cluster, "Arn"]}) == []


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_no_pod_identity_trust_anywhere_is_unconditional(app_synth, stage):
    for part in ("cluster", "serving"):
        template = app_synth.template(stage, part)
        for role, statements in pod_identity_roles(template).items():
            for statement in statements:
                assert set(statement.get("Condition", {}).get("StringEquals", {})) >= {
                    "aws:RequestTag/eks-cluster-arn",
                    "aws:RequestTag/kubernetes-namespace",
                    "aws:RequestTag/kubernetes-service-account",
                }, f"{stage}/{part} {role}"


def test_problems_are_found_in_an_unscoped_trust():
    # the trust the roles had before: the principal alone, TagSession in a statement of its own
    template = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Statement": [
                            {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": POD_IDENTITY},
                            {"Action": "sts:TagSession", "Effect": "Allow", "Principal": POD_IDENTITY},
                        ]
                    }
                },
            },
            "Access": {
                "Type": "AWS::EKS::PodIdentityAssociation",
                "Properties": {"RoleArn": {"Fn::GetAtt": ["Role", "Arn"]}, "Namespace": "ns", "ServiceAccount": "sa"},
            },
        }
    }
    assert len(trust_problems(template, "Role", "arn:aws:eks:us-west-2:123456789012:cluster/c")) == 4
