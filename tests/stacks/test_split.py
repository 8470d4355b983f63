"""A change to the serving workload touches neither the VPC, the cluster nor the nodegroups: only the
serving stack's manifest resource changes, and stateful resources keep their logical IDs."""

from __future__ import annotations

import pytest

from ..helpers import config_with, synth

STATEFUL = {
    "AWS::EC2::VPC",
    "AWS::EC2::Subnet",
    "AWS::EKS::Cluster",
    "AWS::EKS::Nodegroup",
    "AWS::KMS::Key",
    "AWS::EC2::LaunchTemplate",
    "AWS::Logs::LogGroup",
    "AWS::EC2::NatGateway",
}


@pytest.fixture(scope="module")
def before_after(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    (tmp / "a").mkdir(), (tmp / "b").mkdir()
    before = synth([config_with(tmp / "a")], tmp / "a" / "out")
    after = synth(
        [
            config_with(
                tmp / "b",
                # An ungated copy of Llama 3.1 8B (KNOWN_MODELS matches the name, so the memory floor still
                # applies; under meta-llama validation would want serving.hf_token_secret).
                serving={
                    "model": {"id": "llama-3.1-8b-instruct", "source": "example-org/Llama-3.1-8B-Instruct"},
                    "engine": {"max_model_len": 8192, "gpu_memory_utilization": 0.85},
                },
            )
        ],
        tmp / "b" / "out",
    )
    return before, after


@pytest.mark.parametrize("stack", ["network", "cluster"])
def test_model_and_engine_change_leaves_network_and_cluster_untouched(before_after, stack):
    before, after = before_after
    assert before.template("dev", stack) == after.template("dev", stack)


def test_model_and_engine_change_changes_only_the_manifest_resource(before_after):
    before, after = before_after
    old, new = before.template("dev", "serving")["Resources"], after.template("dev", "serving")["Resources"]
    assert set(old) == set(new)
    changed = sorted(name for name in old if old[name] != new[name])
    assert len(changed) == 1 and old[changed[0]]["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
    assert "llama-3.1-8b-instruct" in new[changed[0]]["Properties"]["Manifest"]
    assert "example-org/Llama-3.1-8B-Instruct" in new[changed[0]]["Properties"]["Manifest"]


def test_stateful_resources_live_in_network_and_cluster_stacks(app_synth):
    serving = app_synth.template("dev", "serving")["Resources"]
    assert not [r for r in serving.values() if r["Type"] in STATEFUL]


def test_stateful_logical_ids_are_stable(app_synth):
    """Renaming a construct would replace these; a change here must be deliberate (update the list)."""
    ids = sorted(
        f"{stack}:{name}"
        for stack in ("network", "cluster")
        for name, r in app_synth.template("dev", stack)["Resources"].items()
        if r["Type"] in STATEFUL
    )
    assert ids == EXPECTED_STATEFUL_IDS


EXPECTED_STATEFUL_IDS = [
    "cluster:AddonsKubeRayCrdsHandlerLogGroup7635FB4F",  # the KubeRay CRD step's log group (new, not a rename)
    "cluster:ClusterEB0386A7",
    "cluster:ClusterKubectlProviderHandlerLogGroup3ECFC1AD",
    "cluster:ClusterKubectlProviderframeworkonEventLogGroup6586722A",
    "cluster:ClusterNodegroupGpuNodegroup8D13555C",
    "cluster:ClusterNodegroupSystemNodegroupBF67F25F",
    "cluster:ControlPlaneLogs95F30E24",
    # the log group of CDK's auto-delete handler that empties the verify runner's bucket (new, not a rename)
    "cluster:CustomS3AutoDeleteObjectsCustomResourceProviderLogGroup99DE39BE",
    "cluster:GpuLaunchTemplate",
    "cluster:ObservabilityLogsapplication9B88FDC7",  # Container Insights' groups (stacks/observability.py)
    "cluster:ObservabilityLogsdataplane2F63AC93",
    "cluster:ObservabilityLogshost3226EFF1",
    "cluster:ObservabilityLogsperformance1A3E7C54",
    "cluster:ObservabilityLogsprometheus077EE74D",
    "cluster:SecretsKey317DCF94",
    "cluster:SystemLaunchTemplate",
    "cluster:VerifyRunnerLogs1DFA7770",
    "network:CustomVpcRestrictDefaultSGCustomResourceProviderLogGroup8F67996D",
    "network:FlowLogs16C1943A",
    "network:LogsKeyA6AB43B2",
    "network:Vpc8378EB38",
    "network:VpccontrolplaneSubnet1SubnetABA07DFD",
    "network:VpccontrolplaneSubnet2SubnetD3E5C9AC",
    "network:VpccontrolplaneSubnet3Subnet1795D0C1",
    "network:VpcprivateSubnet1SubnetCEAD3716",
    "network:VpcprivateSubnet2Subnet2DE7549C",
    "network:VpcprivateSubnet3SubnetA5AC68D9",
    "network:VpcpublicSubnet1NATGatewayA036E8A6",
    "network:VpcpublicSubnet1Subnet2BB74ED7",
    "network:VpcpublicSubnet2SubnetE34B022A",
    "network:VpcpublicSubnet3SubnetDFEF064A",
]
