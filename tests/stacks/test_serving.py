"""ServingStack: the inference chart applied after the KubeRay release; the token path through Pod
Identity and the Secrets Store CSI add-ons when a secret is configured."""

from __future__ import annotations

import json

import pytest

from ..helpers import config_with, synth
from .test_stage import template_addons
from .test_trust import trust_problems


def _manifest(result, stage="dev"):
    (res,) = result.resources(stage, "serving", "Custom::AWSCDK-EKS-KubernetesResource").values()
    return res


def test_chart_objects_are_applied_in_one_manifest(app_synth):
    objects = json.loads(_manifest(app_synth)["Properties"]["Manifest"])
    # the verify group's RBAC: nodes cluster-wide, a Role + RoleBinding in kuberay-system and in the serving
    # namespace (charts/inference.py, _verify_rbac)
    assert [o["kind"] for o in objects] == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"] + [
        "Role",
        "RoleBinding",
    ] * 2 + ["RayService"] + ["NetworkPolicy"] * 8  # 2 of them for NIXL's exporter port (PD mode)


def test_manifest_depends_on_the_kuberay_release(app_synth):
    stage = app_synth.stages["dev"]
    manifest, kuberay = stage.serving.manifest, stage.cluster.kuberay_operator
    assert kuberay.node.path in [d.node.path for d in manifest.node.dependencies]  # construct-level ...
    # ... which CDK turns into a stack dependency: the whole cluster stack (the release waits for the
    # operator) is deployed before the serving stack.
    artifacts = json.loads((app_synth.outdir / "assembly-dev" / "manifest.json").read_text())["artifacts"]
    assert stage.cluster.artifact_id in artifacts[stage.serving.artifact_id]["dependencies"]


def test_manifest_targets_the_cluster_through_its_kubectl_provider(app_synth):
    props = _manifest(app_synth)["Properties"]
    assert "KubectlProvider" in props["ServiceToken"]["Fn::ImportValue"]
    assert props["ClusterName"]["Fn::ImportValue"].startswith("dev-cluster:")


def test_no_token_machinery_without_a_secret(app_synth):
    assert app_synth.resources("dev", "serving", "AWS::EKS::PodIdentityAssociation") == {}
    assert app_synth.resources("dev", "serving", "AWS::EKS::Addon") == {}


@pytest.fixture(scope="module")
def with_token(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("token")
    return synth([config_with(tmp, serving={"hf_token_secret": "hf/token"})], tmp / "out")


def test_token_add_ons_are_installed_and_the_pod_identity_agent_once(with_token):
    # EKS allows one add-on of a name per cluster: with observability on (dev), the cluster stack's agent
    # serves the token's association too.
    names = sorted(
        a["Properties"]["AddonName"]
        for part in ("cluster", "serving")
        for a in with_token.resources("dev", part, "AWS::EKS::Addon").values()
    )
    assert names.count("eks-pod-identity-agent") == 1
    assert "aws-secrets-store-csi-driver-provider" in names


def test_the_review_lists_the_token_add_ons_the_templates_create(with_token):
    assert with_token.stages["dev"].rendering().eks_addons == template_addons(with_token, "dev")


def test_pod_identity_binds_the_ray_service_account(with_token):
    (assoc,) = with_token.resources("dev", "serving", "AWS::EKS::PodIdentityAssociation").values()
    assert assoc["Properties"]["Namespace"] == "inference"
    assert assoc["Properties"]["ServiceAccount"] == "ray-llm"


def test_token_reader_may_read_exactly_that_secret(with_token):
    (policy,) = with_token.resources("dev", "serving", "AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"]
    assert json.dumps(statement["Resource"]).endswith(':secret:hf/token-??????"]]}')
    (role,) = with_token.resources("dev", "serving", "AWS::IAM::Role").values()
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    actions = {a for s in trust for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {"sts:AssumeRole", "sts:TagSession"}
    assert all(s["Principal"] == {"Service": "pods.eks.amazonaws.com"} for s in trust)


def test_token_reader_trusts_only_the_ray_service_account_on_this_cluster(with_token):
    # The trust names this stage's cluster by ARN: arn:aws:eks:<region>:<account>:cluster/<the name the
    # cluster stack exports for its AWS::EKS::Cluster>, the ARN format of an EKS cluster.
    serving, cluster = with_token.template("dev", "serving"), with_token.template("dev", "cluster")
    (role,) = [n for n, r in serving["Resources"].items() if r["Type"] == "AWS::IAM::Role"]
    (cluster_id,) = [n for n, r in cluster["Resources"].items() if r["Type"] == "AWS::EKS::Cluster"]
    (export,) = [
        o["Export"]["Name"] for o in cluster["Outputs"].values() if "Export" in o and o["Value"] == {"Ref": cluster_id}
    ]
    arn = {
        "Fn::Join": [
            "",
            ["arn:aws:eks:us-west-2:", {"Ref": "AWS::AccountId"}, ":cluster/", {"Fn::ImportValue": export}],
        ]
    }
    assert trust_problems(serving, role, arn) == []


def test_no_secret_value_anywhere_in_the_templates(with_token):
    text = "".join(p.read_text() for p in with_token.outdir.glob("assembly-dev/*.template.json"))
    assert "SecretString" not in text and "GenerateSecretString" not in text
