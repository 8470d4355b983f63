"""preflight against moto (EC2, STS, SSM, Secrets Manager, ECR), with botocore's Stubber only where moto
lacks the API (Service Quotas for EC2, EKS DescribeClusterVersions / DescribeAddonVersions) or where the
DLC registry (another account's ECR) must answer. Each failing check: exact message and exit code."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from config.instance_types import INSTANCE_TYPES, InstanceSpec
from ops import preflight
from ops.__main__ import main
from ops.aws_clients import Clients

from ..helpers import merge, stage_data, write_stage

ACCOUNT = "123456789012"  # moto's account


class Fake:
    """A moto session plus Stubbers for the APIs moto lacks; `ready()` makes a passing account."""

    def __init__(self, region="us-west-2"):
        self.region = region
        self.session = boto3.session.Session(region_name=region)
        self.stubs = {}
        self.overrides = {}
        for service in ("service-quotas", "eks", "ecr"):
            client = self.session.client(service, region_name=region)
            self.overrides[service] = client
            self.stubs[service] = Stubber(client)

    def quota(self, code, value):
        self.stubs["service-quotas"].add_response(
            "get_service_quota",
            {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": float(value)}},
            {"ServiceCode": "ec2", "QuotaCode": code},
        )

    def k8s_version(self, offered=True):
        versions = [{"clusterVersion": "1.35", "status": "STANDARD_SUPPORT"}] if offered else []
        self.stubs["eks"].add_response(
            "describe_cluster_versions", {"clusterVersions": versions}, {"clusterVersions": ["1.35"]}
        )

    def image(self, error=None, size=None):
        params = {
            "registryId": "763104351884",
            "repositoryName": "ray",
            "imageIds": [{"imageTag": "serve-llm-cuda-v1.0.0"}],
        }
        if error:
            self.stubs["ecr"].add_client_error("describe_images", service_error_code=error, expected_params=params)
        else:
            self.stubs["ecr"].add_response(
                "describe_images",
                {
                    "imageDetails": [
                        {
                            "registryId": "763104351884",
                            "repositoryName": "ray",
                            "imageTags": ["serve-llm-cuda-v1.0.0"],
                            **({"imageSizeInBytes": size} if size else {}),
                        }
                    ]
                },
                params,
            )

    def addon_schema(self, schema=None, raw=None):
        """EKS's answer for the add-on version: a schema the stage's configuration meets, or the one given
        (`raw`: the answer's text as it is)."""
        schema = schema or {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "containerLogs": {"type": "object"},
                "manager": {"type": "object"},
                "agents": {"type": "array"},
            },
            "additionalProperties": False,
        }
        self.stubs["eks"].add_response(
            "describe_addon_configuration",
            {
                "addonName": "amazon-cloudwatch-observability",
                "addonVersion": "v6.4.0-eksbuild.1",
                "configurationSchema": json.dumps(schema) if raw is None else raw,
            },
            {"addonName": "amazon-cloudwatch-observability", "addonVersion": "v6.4.0-eksbuild.1"},
        )

    def bootstrap(self, version="21"):
        self.session.client("ssm", region_name=self.region).put_parameter(
            Name="/cdk-bootstrap/hnb659fds/version", Value=version, Type="String"
        )

    def ready(self, g_quota=256, standard_quota=64, image_error=None, addon_schema=None, image_size=None, raw=None):
        self.quota("L-1216C47A", standard_quota)
        self.quota("L-DB2E81BA", g_quota)
        self.k8s_version()
        self.bootstrap()
        self.addon_schema(addon_schema, raw)
        self.image(image_error, image_size)
        return self

    def run(self, cfg):
        for stub in self.stubs.values():
            stub.activate()
        report, facts = preflight.run(cfg, Clients(self.session, self.region, overrides=self.overrides))
        return report, facts

    def cli(self, tmp_path, data, *extra):
        path = write_stage(tmp_path, data)
        for stub in self.stubs.values():
            stub.activate()
        return main(
            ["preflight", "--stage", data["stage"], "--config-dir", str(path.parent), *extra],
            session=self.session,
            clients=self.overrides,
        )


def _cfg(tmp_path, **overrides):
    from config import load_stage_file

    return load_stage_file(write_stage(tmp_path, merge(stage_data("dev"), overrides)))


def _status(report):
    return {check.name: check.status for check in report.checks}


def test_passing_account_passes_every_check(aws, tmp_path, capsys):
    fake = Fake().ready()
    assert fake.cli(tmp_path, stage_data("dev")) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert out.rstrip().endswith("OK: 10 passed, 0 failed, 0 warnings, 2 skipped")  # the token secret, EFA in the pod
    (efa_pod,) = [line for line in out.splitlines() if line.startswith("EFA in the pod")]
    assert "SKIP" in efa_pod and "FI_EFA_USE_HUGE_PAGE=0" in efa_pod and "2 MiB huge pages" in efa_pod
    assert "g6.8xlarge is offered in us-west-2a (usw2-az2)" in out
    assert "On-Demand G and VT instances: quota 256, in use 0, free 256, this stage needs up to 64" in out


def test_json_output_for_pipelines(aws, tmp_path, capsys):
    fake = Fake().ready()
    assert fake.cli(tmp_path, stage_data("dev"), "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["command"] == "preflight" and report["stage"] == "dev"
    assert {c["name"] for c in report["checks"]} >= {"credentials", "CDK bootstrap", "vCPU quota L-DB2E81BA"}


def test_no_gpu_quota_fails_with_the_increase_to_ask_for(aws, tmp_path):
    report, _ = Fake().ready(g_quota=32).run(_cfg(tmp_path))
    check = report.find("vCPU quota L-DB2E81BA")
    assert check.status == "fail"
    assert check.detail == (
        "On-Demand G and VT instances: quota 32, in use 0, free 32, "
        "this stage needs up to 64: 2 gpu-worker nodes (max) + 0 (a MINIMAL update adds none), "
        "x 32 vCPUs"
    )
    assert check.fix.startswith("request an increase of L-DB2E81BA to at least 64 vCPUs")
    assert report.exit_code == 1


def test_quota_counts_instances_already_running(aws, tmp_path):
    fake = Fake().ready(g_quota=90)
    ec2 = fake.session.client("ec2", region_name="us-west-2")
    ec2.run_instances(ImageId="ami-12c6146b", InstanceType="g6.8xlarge", MinCount=1, MaxCount=1)
    report, _ = fake.run(_cfg(tmp_path))
    check = report.find("vCPU quota L-DB2E81BA")
    assert check.status == "fail" and "quota 90, in use 32, free 58" in check.detail


def test_az_without_the_gpu_type_fails_and_names_the_azs_that_offer_it(aws, tmp_path, capsys):
    fake = Fake("us-east-1").ready()
    data = merge(
        stage_data("dev"),
        {
            "region": "us-east-1",
            "availability_zones": ["us-east-1b", "us-east-1e"],
            "gpu_availability_zone": "us-east-1e",
        },
    )
    assert fake.cli(tmp_path, data, "--suggest") == 1
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("GPU type in GPU AZ"))
    assert "FAIL" in line and "g6.8xlarge is not offered in us-east-1e (use1-az3); offered in: us-east-1a" in line
    assert "gpu_availability_zone: us-east-1b" in out.split("Suggested change")[1]


def test_stage_az_missing_in_the_region_fails(aws, tmp_path):
    report, _ = Fake().ready().run(_cfg(tmp_path, availability_zones=["us-west-2a", "us-west-2e"]))
    check = report.find("availability zones")
    assert check.status == "fail"
    assert check.detail == (
        "us-west-2e not available in us-west-2 (available: us-west-2a, us-west-2b, us-west-2c, us-west-2d)"
    )


def test_type_with_fewer_efa_interfaces_than_the_stage_needs_fails(aws, tmp_path, monkeypatch):
    # the stage's table says 2 EFA interfaces; EC2 says g6.8xlarge has 1
    monkeypatch.setitem(
        INSTANCE_TYPES,
        "g6.8xlarge",
        InstanceSpec(vcpus=32, memory_gib=128, gpus=1, gpu_model="L4", efa_interfaces=2, network_gbps=25.0),
    )
    report, _ = Fake().ready().run(_cfg(tmp_path))
    check = report.find("EFA support")
    assert (check.status, check.detail) == ("fail", "g6.8xlarge supports 1 EFA interface(s), the stage needs 2")


def test_no_bootstrap_fails_with_the_bootstrap_command(aws, tmp_path):
    fake = Fake()
    fake.quota("L-1216C47A", 64), fake.quota("L-DB2E81BA", 256), fake.k8s_version(), fake.image()
    report, _ = fake.run(_cfg(tmp_path))
    check = report.find("CDK bootstrap")
    assert check.status == "fail"
    assert check.detail == (
        "aws://123456789012/us-west-2 is not bootstrapped (/cdk-bootstrap/hnb659fds/version not found)"
    )
    assert check.fix == "scripts/cdk bootstrap aws://123456789012/us-west-2"


def test_kubernetes_version_not_offered_fails(aws, tmp_path):
    fake = Fake()
    fake.quota("L-1216C47A", 64), fake.quota("L-DB2E81BA", 256), fake.k8s_version(offered=False)
    fake.bootstrap(), fake.image()
    report, _ = fake.run(_cfg(tmp_path))
    assert (report.find("Kubernetes version").status, report.find("Kubernetes version").detail) == (
        "fail",
        "EKS does not offer 1.35 in us-west-2",
    )


def test_missing_token_secret_fails(aws, tmp_path):
    report, _ = Fake().ready().run(_cfg(tmp_path, serving={"hf_token_secret": "hf/token"}))
    check = report.find("token secret")
    assert (check.status, check.detail) == ("fail", "secret 'hf/token' does not exist in us-west-2")


def test_existing_token_secret_and_its_add_on_pass(aws, tmp_path):
    fake = Fake().ready()
    fake.session.client("secretsmanager", region_name="us-west-2").create_secret(Name="hf/token", SecretString="x")
    fake.stubs["eks"].add_response(
        "describe_addon_versions",
        {"addons": [{"addonName": preflight.SECRETS_PROVIDER_ADDON}]},
        {"addonName": preflight.SECRETS_PROVIDER_ADDON, "kubernetesVersion": "1.35"},
    )
    report, _ = fake.run(_cfg(tmp_path, serving={"hf_token_secret": "hf/token"}))
    assert _status(report)["token secret"] == "pass"
    assert _status(report)["secrets provider add-on"] == "pass"


def test_wrong_account_fails_and_stops(aws, tmp_path):
    report, _ = Fake().run(_cfg(tmp_path, account="111111111111"))
    check = report.find("credentials")
    assert (check.status, check.detail) == (
        "fail",
        "credentials are for account 123456789012, the stage deploys to 111111111111",
    )
    assert {c.status for c in report.checks[1:]} == {"skip"}
    assert report.exit_code == 1


def test_registry_access_denied_is_a_warning_not_a_failure(aws, tmp_path):
    report, _ = Fake().ready(image_error="AccessDeniedException").run(_cfg(tmp_path))
    check = report.find("image registry")
    assert check.status == "warn" and report.exit_code == 0


def test_registry_without_the_image_fails(aws, tmp_path):
    report, _ = Fake().ready(image_error="ImageNotFoundException").run(_cfg(tmp_path))
    assert report.find("image registry").status == "fail"


@pytest.mark.parametrize("raw", ["not json", "[" * 100_000 + "]" * 100_000, "[1, 2]", '"a string"'])
def test_an_addon_schema_that_is_no_json_object_is_one_failed_line(aws, tmp_path, raw):
    report, _ = Fake().ready(raw=raw).run(_cfg(tmp_path))
    check = report.find("CloudWatch add-on")
    assert check.status == "fail" and "that is no JSON object" in check.detail and report.exit_code == 1


def test_root_volumes_pass_with_the_image_size_ecr_gives(aws, tmp_path):
    report, _ = Fake().ready(image_size=9 * 2**30).run(_cfg(tmp_path))
    check = report.find("root volumes")
    assert (check.status, check.detail) == (
        "pass",
        "the image is 9.0 GiB compressed, ~19 unpacked: two of it fit every node's root volume",
    )


def test_root_volumes_fail_when_the_real_image_is_larger_than_planned(aws, tmp_path):
    # 20 GiB compressed: the system floor is (8 + 105.6) / 0.85 = 134 GiB, the dev GPU floor 155 (17.98 more).
    report, _ = Fake().ready(image_size=20 * 2**30).run(_cfg(tmp_path))
    check = report.find("root volumes")
    assert check.status == "fail" and report.exit_code == 1
    assert check.detail.endswith("two of it do not fit: system_nodegroup.root_volume_gib 100 < 134")


def test_root_volumes_are_not_judged_without_a_size(aws, tmp_path):
    report, _ = Fake().ready().run(_cfg(tmp_path))
    assert report.find("root volumes") is None


def test_no_credentials_is_one_line_in_the_table_and_exit_1(tmp_path, local_aws, capsys):
    path = write_stage(tmp_path, stage_data("dev"))
    assert main(["preflight", "--stage", "dev", "--config-dir", str(path.parent)]) == 1
    captured = capsys.readouterr()
    assert "credentials         FAIL    no AWS credentials found" in captured.out
    assert "Traceback" not in captured.out + captured.err


def test_bad_stage_file_exits_2_with_the_config_line(tmp_path, capsys):
    path = write_stage(tmp_path, merge(stage_data("dev"), {"gpu_nodegroup": {"count": 0}}))
    assert main(["preflight", "--stage", "dev", "--config-dir", str(path.parent)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"{path}: gpu_nodegroup.count: Input should be greater than or equal to 1 (got 0)"
    )


def test_the_addon_configuration_passes_the_schema_eks_gives_for_its_version(aws, tmp_path):
    report, _ = Fake().ready().run(_cfg(tmp_path))
    check = report.find("CloudWatch add-on")
    assert (check.status, check.detail) == (
        "pass",
        "amazon-cloudwatch-observability v6.4.0-eksbuild.1 accepts the configuration",
    )


def test_a_key_the_addon_version_refuses_fails_before_the_deploy_would_roll_back(aws, tmp_path):
    schema = {"type": "object", "properties": {"containerLogs": {"type": "object"}}, "additionalProperties": False}
    report, _ = Fake().ready(addon_schema=schema).run(_cfg(tmp_path))
    check = report.find("CloudWatch add-on")
    assert check.status == "fail" and "\n" not in check.detail
    assert check.detail.startswith(
        "amazon-cloudwatch-observability v6.4.0-eksbuild.1 refuses the configuration: (root): "
    )
    assert "roll back the cluster stack" in check.fix


def test_without_observability_the_addon_is_not_checked(aws, tmp_path):
    fake = Fake()
    fake.quota("L-1216C47A", 64)
    fake.quota("L-DB2E81BA", 256)
    fake.k8s_version()
    fake.bootstrap()
    fake.image()
    report, _ = fake.run(_cfg(tmp_path, observability={"enabled": False}))
    assert report.find("CloudWatch add-on").status == "skip"


def _addon_check(tmp_path, schema=None):
    fake = Fake()
    fake.addon_schema(schema)
    path = write_stage(tmp_path, stage_data("dev"))
    for stub in fake.stubs.values():
        stub.activate()
    return main(
        ["addon-check", "--stage", "dev", "--config-dir", str(path.parent), "--json"],
        session=fake.session,
        clients=fake.overrides,
    )


def test_addon_check_runs_the_addon_check_alone(aws, tmp_path, capsys):
    assert _addon_check(tmp_path) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [(c["name"], c["status"]) for c in checks] == [("CloudWatch add-on", "pass")]


def test_addon_check_fails_on_a_key_the_addon_version_refuses(aws, tmp_path):
    schema = {"type": "object", "properties": {"containerLogs": {"type": "object"}}, "additionalProperties": False}
    assert _addon_check(tmp_path, schema) == 1
