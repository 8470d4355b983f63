"""Unsafe and undeployable stage files are refused at validate time, with one line naming the file and the
field (the shared invalid-case tables in cases.py run every class through the validator and through synth;
these tests add the boundaries, the accepted variants, and what needs more than one file or a process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from pydantic import BaseModel

import app
from config import ConfigError, load_stage_file, load_stages, names
from config.__main__ import main
from config.derived import (
    KNOWN_MODELS,
    PUBLIC_ENDPOINT_LIMIT,
    SUBNET_LAYOUT,
    endpoint_wide_open,
    model_memory_floor,
    public_addresses,
    smallest_vpc_prefix,
    subnet_plan,
)
from config.errors import short
from config.loader import CONFIG_DIR, MAX_FILE_BYTES
from config.rules import secret_kind
from config.schema import StageConfig

from ..helpers import REHEARSAL, ROOT, config_with, data_file, merge, stage_data, write_stage
from ..helpers import refusal as _refusal
from .cases import FAKE_GITHUB_TOKEN, FAKE_HF_TOKEN, FAKE_KEY_ID, FAKE_PRIVATE_KEY, FAKE_SECRET_KEY

# Hopper nodes for models too big for an L4 (the GDN backend and resources as a p5 stage needs them).
P5 = {
    # 400 GiB: two serving images and a 72B checkpoint's 121 GiB (config/first_start.py)
    "gpu_nodegroup": {"instance_type": "p5.48xlarge", "root_volume_gib": 400},
    "serving": {
        "engine": {"gdn_prefill_backend": "triton"},
        "worker_resources": {"cpu_request": 8, "cpu_limit": 16, "memory_request_gib": 32, "memory_limit_gib": 64},
    },
}


def _validate(*args, cwd=ROOT, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "config", "validate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


# --- 1. the public endpoint: the union of the allow-list ----------------------------------------------


def test_public_address_count_is_the_union_without_special_ranges():
    assert public_addresses(["203.0.114.0/24", "203.0.114.0/25"]) == 256  # overlaps counted once
    assert public_addresses(["10.0.0.0/8"]) == 0  # private: never public
    assert public_addresses(["10.0.0.0/7"]) == 2**24  # 10/8 private, 11/8 public
    assert public_addresses(["0.0.0.0/1", "128.0.0.0/1"]) == public_addresses(["0.0.0.0/0"])


def test_exactly_a_slash_8_of_public_addresses_is_accepted(tmp_path):
    # the threshold is "more than a /8's worth": 11.0.0.0/8 is the largest accepted allow-list
    cfg = config_with(tmp_path, cluster={"endpoint": {"public_access_cidrs": ["11.0.0.0/8"]}})
    assert public_addresses(cfg.cluster.endpoint.public_access_cidrs) == PUBLIC_ENDPOINT_LIMIT


@pytest.mark.parametrize(
    "cidrs",
    [
        ["11.0.0.0/8", "12.0.0.0/24"],
        ["11.0.0.0/9", "12.0.0.0/9", "13.0.0.0/9"],
        ["0.0.0.0/2"],
        ["64.0.0.0/3", "203.0.114.0/24"],
    ],
)
def test_more_than_a_slash_8_is_refused_in_one_range_or_in_pieces(tmp_path, cidrs):
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": cidrs}}})
    assert ": cluster.endpoint.public_access_cidrs" in line and "more than a /8's worth" in line


def test_allow_public_internet_accepts_the_pieces_and_the_warning_helper_sees_them(tmp_path):
    cidrs = ["0.0.0.0/1", "128.0.0.0/1"]
    cfg = config_with(tmp_path, cluster={"endpoint": {"public_access_cidrs": cidrs, "allow_public_internet": True}})
    assert cfg.cluster.endpoint.public_access_cidrs == cidrs
    # what stacks/cluster.py's synth warning should test instead of a literal /0
    assert endpoint_wide_open(cidrs) and endpoint_wide_open(["0.0.0.0/0"]) and not endpoint_wide_open(["11.0.0.0/8"])


@pytest.mark.parametrize("cidr", ["2001:db8::/32", "::/0", "2600:1f14::/36"])
def test_ipv6_is_refused_even_with_allow_public_internet(tmp_path, cidr):
    # EKS: "You can't add IPv6 CIDR blocks to IPv4 clusters" (VpcConfigRequest.publicAccessCidrs)
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": [cidr], "allow_public_internet": True}}})
    assert "public_access_cidrs[0]: " in line and "is IPv6" in line


@pytest.mark.parametrize(
    "cidr",
    [
        "10.1.0.0/16",
        "172.16.0.0/12",
        "192.168.1.0/24",
        "127.0.0.1/32",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "224.0.0.0/4",
    ],
)
def test_ranges_that_never_reach_a_public_endpoint_are_refused(tmp_path, cidr):
    line = _refusal(tmp_path, {"cluster": {"endpoint": {"public_access_cidrs": ["203.0.114.0/24", cidr]}}})
    assert "public_access_cidrs[1]: " in line and "private or reserved range" in line


@pytest.mark.parametrize("cidr", ["198.51.100.0/24", "192.0.2.0/24", "203.0.113.7/32"])
def test_documentation_ranges_stay_allowed_as_placeholders(tmp_path, cidr):
    # the shipped dev.yaml's example range is TEST-NET-2
    assert config_with(tmp_path, cluster={"endpoint": {"public_access_cidrs": [cidr]}})


# --- 2. secret values, in any string of the file, never echoed --------------------------------------


@pytest.mark.parametrize(
    "kind, value",
    [
        ("a Hugging Face token", FAKE_HF_TOKEN),
        ("an AWS access key id", FAKE_KEY_ID),
        ("an AWS access key id", "ASIA" + "Q" * 16),
        ("a private key", FAKE_PRIVATE_KEY),
        ("a private key", "-----BEGIN " + "OPENSSH PRIVATE KEY-----"),
        ("a GitHub token", FAKE_GITHUB_TOKEN),
        ("a Hugging Face token", "token=" + FAKE_HF_TOKEN + " trailing"),
    ],
)
def test_secret_shapes_are_recognised(kind, value):
    assert secret_kind(value) == kind


@pytest.mark.parametrize(
    "value",
    [
        "hf/token",
        "arn:aws:secretsmanager:us-west-2:123456789012:secret:hf/token-AbCdEf",
        "Qwen/Qwen3.5-9B",
        "hf_short",
        "AKIA-not-a-key",
        "/var/lib/model-cache",
        "pd-inference/HuggingFaceToken/prod",
    ],
)
def test_names_and_paths_are_not_secrets(value):
    assert secret_kind(value, "hf_token_secret", reference=True) is None  # the field that names the secret


def test_a_secret_key_is_found_under_any_key_and_a_long_name_only_under_a_key_like_one():
    assert secret_kind(FAKE_SECRET_KEY, "secret") == "an AWS secret access key"
    assert secret_kind("aws_secret_access_key=" + FAKE_SECRET_KEY, "note") == "an AWS secret access key"
    assert secret_kind(FAKE_SECRET_KEY, "owner") == "an AWS secret access key"  # random: under any key
    # 40 characters of words run together read as a name, except where the key says secret
    assert secret_kind("ProjectAlphaBetaGammaDeltaEpsilonZeta123", "owner") is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"serving": {"hf_token_secret": FAKE_HF_TOKEN}}, "serving.hf_token_secret"),
        ({"tags": {"owner": FAKE_KEY_ID}}, "tags.owner"),
        ({"serving": {"model": {"id": FAKE_GITHUB_TOKEN}}}, "serving.model.id"),
        ({"cluster": {"admin_principal_arns": [FAKE_HF_TOKEN]}}, "cluster.admin_principal_arns[0]"),
        (
            {
                "benchmark": {
                    "profiles": [{"name": FAKE_HF_TOKEN, "input_tokens": 1, "output_tokens": 1, "concurrency": [1]}]
                }
            },
            "benchmark.profiles[0].name",
        ),
        (
            {"serving": {"engine": {"extra_args": {"served_model_name": FAKE_HF_TOKEN}}}},
            "serving.engine.extra_args.served_model_name",
        ),
        ({"unknown_section": {"nested": [FAKE_HF_TOKEN]}}, "unknown_section.nested[0]"),
    ],
)
def test_a_secret_anywhere_is_refused_by_field_without_its_value(tmp_path, change, field):
    line = _refusal(tmp_path, change)
    assert f": {field}: looks like " in line
    for secret in (FAKE_HF_TOKEN, FAKE_KEY_ID, FAKE_GITHUB_TOKEN, FAKE_HF_TOKEN[3:20]):
        assert secret not in line


def test_a_secret_in_the_pipeline_file_is_refused_too(tmp_path):
    from config.pipeline import load_pipeline

    (tmp_path / "_pipeline.yaml").write_text(yaml.safe_dump({"region": "us-west-2", "repository": FAKE_HF_TOKEN}))
    with pytest.raises(ConfigError) as caught:
        load_pipeline(tmp_path, ["dev"])
    assert str(caught.value).startswith(f"{tmp_path / '_pipeline.yaml'}: repository: looks like a Hugging Face token")


# --- 3. namespaces and the weight cache's host path ---------------------------------------------------


@pytest.mark.parametrize(
    "namespace", ["kube-system", "kube-public", "kube-node-lease", "default", "kuberay-system", "kube-anything"]
)
def test_the_serving_namespace_is_never_a_system_one(tmp_path, namespace):
    assert f": serving.namespace: {namespace} is" in _refusal(tmp_path, {"serving": {"namespace": namespace}})


def test_kube_system_may_be_a_client_namespace(tmp_path):
    # decided: an ingress or gateway proxy may run there; the policy opens only Serve's port 8000
    cfg = config_with(tmp_path, serving={"client_namespaces": ["kube-system", "gateway"]})
    assert cfg.serving.client_namespaces == ["kube-system", "gateway"]


@pytest.mark.parametrize(
    "host_path",
    [
        "//",
        "/etc",
        "/etc/model-cache",
        "/var",
        "/var/lib",
        "/var/lib/",
        "/usr/local",
        "/var/lib/kubelet",
        "/var/lib/containerd/x",
        "/run/cache",
        "/dev/shm/x",
        "/sys/fs",
        "/boot/x",
        "/home",
        "/root/cache",
        "/var/run/x",
        "/tmp",
    ],
)
def test_the_host_path_is_never_a_system_directory(tmp_path, host_path):
    # an allowlist now (config/rules/weight_cache.py): outside /var/lib/model-cache, or not in normal form
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"host_path": host_path}}})
    assert ": serving.weight_cache.host_path: " in line
    assert "is outside the node's weight cache folder" in line or "has an empty segment" in line


@pytest.mark.parametrize("host_path", ["/var/lib/../etc", "/data/./cache", "/data/cache/.."])
def test_the_host_path_has_no_dot_segments(tmp_path, host_path):
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"host_path": host_path}}})
    assert "has a '.' segment" in line or "has a '..' segment" in line


# The weight cache's own folder and folders below it; any other folder of the node is refused
# (tests/config/test_workload_rules.py).
@pytest.mark.parametrize(
    "host_path",
    [
        "/var/lib/model-cache",
        "/var/lib/model-cache/models",
        "/var/lib/model-cache/Qwen3.5-9B",
        "/var/lib/model-cache/a..b",
    ],
)
def test_directories_of_their_own_are_accepted(tmp_path, host_path):
    assert config_with(tmp_path, serving={"weight_cache": {"host_path": host_path}}).serving.weight_cache.host_path


# --- 4. tags ------------------------------------------------------------------------------------------


def test_the_app_adds_at_most_its_reserved_number_of_tags_to_a_resource(app_synth, stages):
    """MAX_STAGE_TAGS = 50 - APP_TAGS_PER_RESOURCE: the reserve must cover what the stacks add."""
    worst = 0
    for stage, cfg in stages.items():
        for stack in ("network", "cluster", "serving"):
            for resource in app_synth.template(stage, stack)["Resources"].values():
                tags = resource.get("Properties", {}).get("Tags")
                keys = [t["Key"] for t in tags] if isinstance(tags, list) else list(tags or {})
                worst = max(worst, len([k for k in keys if k not in cfg.tags]))
    assert worst == names.APP_TAGS_PER_RESOURCE


def test_the_most_tags_a_stage_may_add_are_accepted(tmp_path):
    data = stage_data("dev")
    data["tags"] = {f"team-{index}": "x" for index in range(names.MAX_STAGE_TAGS)}
    assert len(load_stage_file(write_stage(tmp_path, data)).tags) == names.MAX_STAGE_TAGS == 46


@pytest.mark.parametrize(
    "key, value",
    [
        ("Kostenstelle", "Forschung und Entwicklung"),
        ("owner", "équipe-ML"),
        ("a/b:c=d+e@f", ""),
        ("k" * 128, "v" * 256),
        ("awsome", "aws:fine as a value"),
    ],
)
def test_tags_within_the_aws_rules_are_accepted(tmp_path, key, value):
    assert config_with(tmp_path, tags={key: value}).tags[key] == value


@pytest.mark.parametrize("key", ["aws:x", "AWS:x", "Aws:cost", "aWs:"])
def test_the_reserved_prefix_is_refused_in_any_case(tmp_path, key):
    assert "the aws: prefix is reserved" in _refusal(tmp_path, {"tags": {key: "x"}})


@pytest.mark.parametrize("value", ["a\nb", "tab\there", "semi;colon", 'quote"', "line\u2028sep", "star*"])
def test_tag_values_outside_the_aws_characters_are_refused(tmp_path, value):
    assert ": tags.owner: " in _refusal(tmp_path, {"tags": {"owner": value}})


# --- 5. every derived name within AWS's limits, and in one place --------------------------------------


def test_every_explicit_name_in_the_templates_comes_from_names_py(app_synth, stages):
    for stage, cfg in stages.items():
        derived = {n.kind: n.value for n in names.for_stage(cfg)}
        built = app_synth.stages[stage]
        assert sorted([built.network.stack_name, built.cluster.stack_name, built.serving.stack_name]) == sorted(
            n.value for n in names.for_stage(cfg) if n.kind == "cloudformation-stack"
        )
        cluster = app_synth.one(stage, "cluster", "AWS::EKS::Cluster")["Properties"]["Name"]
        groups = [
            g["Properties"].get("LogGroupName")
            for g in app_synth.resources(stage, "cluster", "AWS::Logs::LogGroup").values()
        ]
        project = app_synth.one(stage, "cluster", "AWS::CodeBuild::Project")["Properties"]["Name"]
        bucket = app_synth.one(stage, "cluster", "AWS::S3::Bucket")["Properties"]["BucketName"]["Fn::Join"][1]
        bucket = "".join(
            names.ACCOUNT_PLACEHOLDER
            if part == {"Ref": "AWS::AccountId"}
            else cfg.region
            if part == {"Ref": "AWS::Region"}
            else part
            for part in bucket
        )
        assert (cluster, project, bucket) == (
            derived["eks-cluster"],
            derived["codebuild-project"],
            derived["s3-bucket"],
        )
        insights = (
            [names.container_insights_log_group(cfg.cluster_name, kind) for kind in names.CONTAINER_INSIGHTS_LOG_KINDS]
            if cfg.observability.enabled
            else []
        )
        assert sorted(g for g in groups if g) == sorted([derived["log-group"], *insights])


# `*_name=` arguments in stacks/ that pick or reference something rather than name a new resource
NOT_NAMING = (
    "subnet_group_name",
    "device_name",
    "group_name",
    "addon_name",
    "resource_name",
    "metric_name",
)  # a metric's name within its namespace, not a resource


def test_the_stacks_name_nothing_that_names_py_does_not_know():
    """A tripwire: a new explicitly named resource in stacks/ needs its AWS limit in config/names.py."""
    found = set()
    for path in sorted((ROOT / "stacks").glob("*.py")):
        text = path.read_text()
        for arg, value in re.findall(r"\b(\w+_name)=([^,)\n]+)", text):
            if arg not in NOT_NAMING and not value.endswith(".cluster_name"):
                found.add(f"{path.name}: {arg}={value}")
        found |= {f"{path.name}: Name: {value}" for value in re.findall(r'"Name": (\w+)', text)}
    assert (
        found
        == {
            "assembly.py: stack_name=PIPELINE_STACK",  # names.PIPELINE_STACK
            "pipeline.py: pipeline_name=PIPELINE_NAME",  # names.PIPELINE_NAME
            "pipeline.py: project_name=pipeline_diff_project(stage",  # names.pipeline_diff_project
            "pipeline.py: parameter_name=deployed_commit_parameter(stage",  # names.deployed_commit_parameter
            'stage.py: stack_name=f"{cfg.stage}-network"',  # names.stack_name
            'stage.py: stack_name=f"{cfg.stage}-cluster"',
            'stage.py: stack_name=f"{cfg.stage}-serving"',
            "cluster.py: cluster_name=cluster_name",  # names.cluster_name (via StageConfig)
            'cluster.py: log_group_name=f"/aws/eks/{cluster_name}/cluster"',  # names.control_plane_log_group
            "observability.py: log_group_name=container_insights_log_group(cluster_name",  # names.container_insights_log_group
            "verify_runner.py: bucket_name=verify_source_bucket(stage",  # names.verify_source_bucket
            "verify_runner.py: Name: name",  # names.verify_runner_name
        }
    ), found


def test_a_stage_name_too_long_for_the_bucket_names_stage_and_the_room(tmp_path):
    stage = "a" * 21  # 20 + 21 + 14 + len("us-west-2") = 64
    data = merge(stage_data("dev"), {"stage": stage})
    path = write_stage(tmp_path, data)
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert str(caught.value) == (
        f"{path}: stage: '{stage}' makes the verify runner's S3 bucket name "
        f"'pd-inference-{stage}-verify-<account-id>-us-west-2' 64 characters long (allowed: at most 63, so stage "
        "of at most 20 characters here)"
    )


def test_a_stage_name_at_the_limit_is_accepted(tmp_path):
    data = merge(stage_data("dev"), {"stage": "a" * 20, "account": "123456789012"})
    assert load_stage_file(write_stage(tmp_path, data)).stage == "a" * 20


@pytest.mark.parametrize(
    "stage, region, ok",
    [
        ("a" * 15, "ap-southeast-5", True),
        ("a" * 16, "ap-southeast-5", False),
        ("a" * 16, "us-gov-west-1", True),
        ("a" * 17, "us-gov-west-1", False),
    ],
)
def test_the_bucket_limit_depends_on_the_region(stage, region, ok):
    (bucket,) = [n for n in names.derived_names(stage, None, None, region) if n.kind == "s3-bucket"]
    assert (not bucket.too_long) is ok


def test_every_derived_name_of_the_longest_legal_inputs_is_well_formed():
    for name in names.derived_names("a" * 8, "c" * 100, "123456789012", "us-west-2"):
        assert name.well_formed and (name.too_long is False or name.kind == "s3-bucket")


# --- 6. the VPC must hold the subnet layout -----------------------------------------------------------


def test_subnet_layout_is_what_the_network_stack_builds(app_synth, stages):
    for stage, cfg in stages.items():
        subnets = app_synth.resources(stage, "network", "AWS::EC2::Subnet").values()
        built = []
        for subnet in subnets:
            tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
            built.append((tags["aws-cdk:subnet-name"], subnet["Properties"]["CidrBlock"]))
        masks = {group: {int(cidr.split("/")[1]) for g, cidr in built if g == group} for group, _ in built}
        assert masks == {group: {prefix} for group, prefix in SUBNET_LAYOUT}
        assert sorted(built) == sorted(subnet_plan(cfg.network.vpc_cidr, len(cfg.availability_zones)))


@pytest.mark.parametrize(
    "cidr, zones, fits",
    [("10.0.0.0/17", 2, True), ("10.0.0.0/18", 2, False), ("10.0.0.0/17", 3, False), ("172.20.0.0/16", 6, True)],
)
def test_subnet_plan_agrees_with_cdk_at_the_boundaries(cidr, zones, fits):
    """The prediction against CDK's own allocator: the network stack alone, synthesized in memory."""
    import aws_cdk as cdk
    from aws_cdk import aws_logs as logs

    from config.schema import Network
    from stacks.network import NetworkProps, NetworkStack

    zone_names = [f"us-west-2{letter}" for letter in "abcdef"[:zones]]
    props = NetworkProps(zones=zone_names, network=Network(vpc_cidr=cidr), log_retention=logs.RetentionDays.ONE_WEEK)
    app_ = cdk.App()
    try:
        stack = NetworkStack(app_, "N", props=props, env=cdk.Environment(region="us-west-2"))
        template = app_.synth().get_stack_by_name(stack.stack_name).template
    except Exception as exc:  # noqa: BLE001 - jsii's error for "exceeds remaining space"
        assert not fits, exc
        assert subnet_plan(cidr, zones) is None
        return
    assert fits
    built = sorted(
        r["Properties"]["CidrBlock"] for r in template["Resources"].values() if r["Type"] == "AWS::EC2::Subnet"
    )
    assert built == sorted(cidr for _, cidr in subnet_plan(cidr, zones))


def test_smallest_vpc_per_az_count():
    assert [smallest_vpc_prefix(zones) for zones in (2, 3, 6)] == [17, 16, 16]


# --- 7. patterns are anchored at both ends ------------------------------------------------------------


def _patterns(model: type[BaseModel], seen=None):
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        text = repr(field.annotation) + repr(field.metadata)
        yield from ((f"{model.__name__}.{name}", p) for p in re.findall(r"pattern='((?:[^'\\]|\\.)*)'", text))
        for arg in _models_in(field.annotation):
            yield from _patterns(arg, seen)


def _models_in(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _models_in(arg)


def test_every_schema_pattern_is_anchored_at_start_and_end_of_text():
    found = list(_patterns(StageConfig))
    assert len(found) >= 15, found
    for where, pattern in found:
        pattern = pattern.encode().decode("unicode_escape")
        assert pattern.startswith(r"\A") and pattern.endswith(r"\z"), (where, pattern)


@pytest.mark.parametrize(
    "field, valid",
    [
        (("stage",), "dev"),
        (("region",), "us-west-2"),
        (("serving", "namespace"), "inference"),
        (("serving", "service_name"), "ray-llm"),
        (("serving", "model", "id"), "qwen3.5-9b"),
        (("cluster", "name"), "pd-dev"),
        (("addons", "kuberay_operator"), "1.6.2"),
        (("serving", "ray_version"), "2.58.0"),
    ],
)
@pytest.mark.parametrize("variant", ["{}\n", "{} ", "\t{}", "{}\r\n", " {}"])
def test_whitespace_around_an_identifier_is_refused(tmp_path, field, valid, variant):
    data = stage_data("dev")
    target = data
    for part in field[:-1]:
        target = target.setdefault(part, {})
    target[field[-1]] = variant.format(valid)
    path = write_stage(tmp_path, data, name="dev")
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert f": {'.'.join(field)}: " in str(caught.value) and "does not match" in str(caught.value)


# --- 8. two stage files that collide in one account and region ----------------------------------------


def _two_stages(tmp_path, a=None, b=None):
    folder = tmp_path / "config"
    folder.mkdir()
    write_stage(folder, merge(stage_data("dev"), {"stage": "alpha", **(a or {})}))
    write_stage(folder, merge(stage_data("dev"), {"stage": "beta", **(b or {})}))
    return folder


def test_two_stages_with_one_cluster_name_are_refused_naming_both_files(tmp_path):
    folder = _two_stages(tmp_path, b={"cluster": {"name": "pd-inference-alpha"}})
    with pytest.raises(ConfigError) as caught:
        load_stages(folder)
    assert str(caught.value) == (
        f"{folder}/beta.yaml: cluster.name: the EKS cluster name 'pd-inference-alpha' is also the EKS cluster name "
        f"of {folder}/alpha.yaml, in the same account and region (any account: account is unset, us-west-2) "
        "(allowed: a cluster.name that gives no name another stage file there gives)"
    )


def test_the_collision_is_reported_where_the_name_was_set(tmp_path):
    # alpha sorts first but set the clashing name: the line points at alpha's cluster.name
    folder = _two_stages(tmp_path, a={"cluster": {"name": "pd-inference-beta"}})
    with pytest.raises(ConfigError) as caught:
        load_stages(folder)
    assert str(caught.value).startswith(f"{folder}/alpha.yaml: cluster.name: ")
    assert f"of {folder}/beta.yaml" in str(caught.value)


@pytest.mark.parametrize(
    "a, b",
    [
        (
            {"account": "111111111111", "cluster": {"name": "shared"}},
            {"account": "111111111111", "cluster": {"name": "shared"}},
        ),
        ({"account": "111111111111", "cluster": {"name": "shared"}}, {"cluster": {"name": "shared"}}),
    ],
)
def test_same_or_unknown_account_collides(tmp_path, a, b):
    with pytest.raises(ConfigError, match="is also the EKS cluster name of"):
        load_stages(_two_stages(tmp_path, a, b))


@pytest.mark.parametrize(
    "a, b",
    [
        (
            {"account": "111111111111", "cluster": {"name": "shared"}},
            {"account": "222222222222", "cluster": {"name": "shared"}},
        ),
        (
            {"cluster": {"name": "shared"}},
            {
                "region": "us-east-1",
                "availability_zones": ["us-east-1a", "us-east-1b"],
                "gpu_availability_zone": "us-east-1a",
                "network": {"vpc_cidr": "10.0.0.0/17"},
                "cluster": {"name": "shared"},
            },
        ),
    ],
)
def test_other_account_or_region_does_not_collide(tmp_path, a, b):
    assert [cfg.stage for cfg in load_stages(_two_stages(tmp_path, a, b))] == ["alpha", "beta"]


def test_the_validator_and_synth_refuse_the_collision_with_one_line(tmp_path, capsys):
    folder = _two_stages(tmp_path, b={"cluster": {"name": "pd-inference-alpha"}})
    assert main(["validate", str(folder)]) == 2
    validator = capsys.readouterr()
    assert validator.out == "" and len(validator.err.splitlines()) == 1
    outdir = tmp_path / "cdk.out"
    assert app.main(context={"config_dir": str(folder)}, outdir=str(outdir)) == 2
    assert capsys.readouterr().err == validator.err
    assert not outdir.exists() or not any(outdir.iterdir())


# --- 9. no traceback, no hang ------------------------------------------------------------------------


def _one_line_exit_2(run, path, phrase):
    assert run.returncode == 2, run.stderr
    assert run.stdout == "" and "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: ") and phrase in lines[0], lines


@pytest.mark.parametrize(
    "content, phrase",
    [
        ("stage: dev\nnetwork: {nat_gateways: " + "1" * 100_000 + "}\n", "a number of 100000 characters"),
        ("stage: dev\nx: 1.0e+" + "9" * 100 + "\n", "a number of 105 characters"),
        (
            "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9 if i else ["x"] * 9) + "]\n" for i in range(9)),
            "more than 64 YAML aliases",
        ),
        (
            "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 7 if i else ["x"] * 7) + "]\n" for i in range(10)),
            "the YAML expands to more than 20000 values",
        ),
        ("stage: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested more than 20 levels deep"),
        ("stage: " + "{a: " * 20_000 + "1" + "}" * 20_000 + "\n", "nested more than 20 levels deep"),
        ("- " * 5000 + "x\n", "nested more than 20 levels deep"),
    ],
)
def test_hostile_yaml_ends_fast_with_one_line(tmp_path, content, phrase):
    path = tmp_path / "dev.yaml"
    path.write_text(content)
    _one_line_exit_2(_validate(str(path)), path, phrase)  # timeout=60: the gate is the outcome


def test_dev_zero_is_refused_without_reading_it():
    _one_line_exit_2(_validate("/dev/zero"), "/dev/zero", "is a character device, not a stage file")


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "dev.yaml"
    os.mkfifo(fifo)
    _one_line_exit_2(_validate(str(fifo)), fifo, "is a named pipe (FIFO), not a stage file")


def test_a_folder_as_the_stage_file_is_one_line(tmp_path):
    folder = tmp_path / "dev.yaml"
    folder.mkdir()
    with pytest.raises(ConfigError) as caught:
        load_stage_file(folder)
    assert str(caught.value).startswith(f"{folder}: (file): is a folder, not a stage file")
    _one_line_exit_2(_validate(str(folder)), folder, "(folder): no stage files")  # the CLI reads a folder's stages


def test_a_file_larger_than_the_limit_is_refused_even_if_stat_says_otherwise(tmp_path, monkeypatch):
    from config import loader

    path = tmp_path / "dev.yaml"
    path.write_text("# " + "x" * (MAX_FILE_BYTES * 4) + "\n")
    real = os.stat

    class Small:
        def __init__(self, info):
            self.st_mode, self.st_size = info.st_mode, 10

    monkeypatch.setattr(loader.os, "stat", lambda p: Small(real(p)))
    with pytest.raises(ConfigError, match=f"more than {MAX_FILE_BYTES} bytes is too large"):
        load_stage_file(path)


def test_messages_never_repr_a_whole_structure_or_a_huge_integer():
    assert short(10**5000) == "<an integer of about 5001 digits>"
    assert short(list(range(10**6))) == "<a list of 1000000 items>"
    assert short({str(i): i for i in range(1000)}) == "<a mapping of 1000 keys>"
    assert len(short("x" * 10**6)) <= 40


# --- 10. the validator's messages and its folder mode ---------------------------------------------------


def test_an_unknown_key_is_reported_before_the_missing_key_it_hides(tmp_path):
    data = stage_data("dev")
    data["serving"]["upgrade_strategie"] = data["serving"].pop("upgrade_strategy")
    path = write_stage(tmp_path, data, name="dev")
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert str(caught.value).startswith(
        f"{path}: serving.upgrade_strategie: unknown key, did you mean upgrade_strategy? (allowed: "
    )
    assert str(caught.value).endswith("; and 1 more problem in the file")


def test_no_suggestion_for_a_key_like_nothing_allowed(tmp_path):
    line = _refusal(tmp_path, {"zzz": 1})
    assert ": zzz: unknown key (allowed: " in line


def test_validate_a_folder_prints_every_stage_as_given():
    run = _validate("config/")
    assert run.returncode == 0, run.stderr
    assert [line.split(": ok: ")[0] for line in run.stdout.splitlines()] == ["config/dev.yaml", "config/prod.yaml"]


def test_validate_a_folder_from_outside_the_checkout(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = _validate(f"{CONFIG_DIR}/", cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0].startswith(f"{CONFIG_DIR}/dev.yaml: ok: stage dev:")


def test_validate_by_the_package_path_and_relative_paths_as_typed(tmp_path):
    folder = tmp_path / "stages"
    folder.mkdir()
    write_stage(folder, stage_data("dev"))
    run = subprocess.run(
        [sys.executable, str(ROOT / "config"), "validate", "./stages/dev.yaml", "stages/"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert [line.split(": ok:")[0] for line in run.stdout.splitlines()] == ["./stages/dev.yaml", "stages/dev.yaml"]


def test_a_folder_with_a_bad_pipeline_file_fails_validation_like_synth(tmp_path, capsys):
    folder = tmp_path / "config"
    folder.mkdir()
    write_stage(folder, stage_data("dev"))
    (folder / "_pipeline.yaml").write_text("region: us-west-2\n")
    assert main(["validate", str(folder)]) == 2
    assert capsys.readouterr().err.startswith(f"{folder / '_pipeline.yaml'}: ")


# --- 11. a model that cannot fit ------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["qwen3.5-9b", "qwen3.5-27b"])
def test_qwen35_parameter_count_is_computed_from_its_config(model):
    """KNOWN_MODELS' 9.65e9 and 27.78e9: every weight of the committed config.json (text, MTP layer, vision tower)."""
    config = json.loads(data_file(REHEARSAL / f"{model}-config.json").read_text())
    t, v = config["text_config"], config["vision_config"]
    h, layers = t["hidden_size"], t["num_hidden_layers"]
    full = t["layer_types"].count("full_attention")
    hd, heads, kv_heads = t["head_dim"], t["num_attention_heads"], t["num_key_value_heads"]
    attention = h * heads * hd * 2 + 2 * h * kv_heads * hd + heads * hd * h  # q with its output gate, k, v, o
    qk, vv = (
        t["linear_num_key_heads"] * t["linear_key_head_dim"],
        t["linear_num_value_heads"] * t["linear_value_head_dim"],
    )
    deltanet = (
        h * (2 * qk + 2 * vv)
        + h * 2 * t["linear_num_value_heads"]
        + (2 * qk + vv) * t["linear_conv_kernel_dim"]
        + vv * h
    )
    mlp = 3 * h * t["intermediate_size"]
    text = 2 * t["vocab_size"] * h + full * attention + (layers - full) * deltanet + layers * mlp
    mtp = attention + mlp + 2 * h * h
    vh, merged = v["hidden_size"], v["hidden_size"] * v["spatial_merge_size"] ** 2
    vision = v["depth"] * (4 * vh * vh + 2 * vh * v["intermediate_size"]) + merged * (merged + v["out_hidden_size"])
    total = text + mtp + vision
    assert abs(total - KNOWN_MODELS[model].parameters) / total < 0.01, total
    assert KNOWN_MODELS[model].kv_bytes_per_token == full * kv_heads * hd * 2 * 2


def test_the_reference_deployment_fits_with_its_margin(dev):
    floor = model_memory_floor(dev)
    assert (round(floor.weights_gib, 1), floor.available_gib) == (18.0, 21.6)
    assert floor.needed_gib < floor.available_gib


@pytest.mark.parametrize(
    "source",
    [
        "openai/gpt-oss-20b",
        "Qwen/Qwen3.5-27B-AWQ",
        "Qwen/Qwen2.5-14B-Instruct-FP8",
        "mistralai/Mixtral-8x7B-Instruct",
        "my-org/house-model",
        "my-org/no-size-here",
    ],
)
def test_quantized_or_unsized_models_are_not_refused_on_an_l4(tmp_path, source):
    assert config_with(tmp_path, serving={"model": {"source": source}}).serving.model.source == source


def test_a_large_model_fits_with_enough_gpus_per_engine(tmp_path):
    cfg = config_with(
        tmp_path,
        **merge(P5, {"serving": {"model": {"source": "Qwen/Qwen3.5-72B"}, "engine": {"tensor_parallel_size": 2}}}),
    )
    assert model_memory_floor(cfg).available_gib > model_memory_floor(cfg).needed_gib


def test_one_h100_is_not_enough_for_72b(tmp_path):
    line = _refusal(tmp_path, merge(P5, {"serving": {"model": {"source": "Qwen/Qwen3.5-72B"}}}))
    assert ": serving.model.source: Qwen/Qwen3.5-72B needs at least 121.7 GiB" in line
    assert "(allowed: a smaller or quantized model, or tensor_parallel_size 2 or more" in line


def test_the_memory_hint_names_a_tp_the_heads_allow(tmp_path):
    # Qwen3.5-27B needs three L4s of memory, but its 4 KV heads refuse TP 3: the hint is TP 4
    change = {"gpu_nodegroup": {"instance_type": "g6.12xlarge"}, "serving": {"model": {"source": "Qwen/Qwen3.5-27B"}}}
    line = _refusal(tmp_path, change)
    assert "(allowed: a smaller or quantized model, or tensor_parallel_size 4 or more;" in line


def test_a_declared_size_overrides_the_name(tmp_path):
    cfg = config_with(tmp_path, serving={"model": {"source": "Qwen/Qwen3.5-72B", "parameters_billion": 7.5}})
    assert model_memory_floor(cfg).basis == "serving.model.parameters_billion"


def test_an_fp8_checkpoint_counts_one_byte_per_parameter(tmp_path):
    line = _refusal(tmp_path, {"serving": {"model": {"source": "Qwen/Qwen3.5-35B-A3B-FP8"}}})
    assert "(90% of the 35B in its name) x 1 bytes = 29.3 GiB of weights" in line


# --- only a file the app reads as a stage validates as one ---------------------------------------------------


def _dev_text() -> str:
    return (CONFIG_DIR / "dev.yaml").read_text()


@pytest.mark.parametrize(
    "file_name",
    ["dev.yml", "dev.YAML", "dev.yaml ", "dev.yaml.bak", "dev.json", "dev", ".dev.yaml"],
)
def test_a_file_the_app_never_reads_as_a_stage_does_not_validate(tmp_path, file_name, capsys):
    path = tmp_path / file_name
    path.write_text(_dev_text())
    assert main(["validate", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"{path}: (file): {file_name!r} is not a stage file's name: the app reads only"), line


def test_the_app_and_the_validator_share_the_stage_name_rule(monkeypatch):
    import config.schema

    calls = []
    monkeypatch.setattr(app, "is_valid_name", lambda value: calls.append(value) or False)
    with pytest.raises(app.ContextError):
        app._context({"stage": "dev", "config_dir": None, "nag": None}.get)
    assert calls == ["dev"] and app.is_valid_name is not config.schema.is_valid_name  # the stand-in was asked
    assert config.schema.is_stage_file_name("dev.yaml") and not config.schema.is_stage_file_name("dev .yaml")


# --- invisible bidirectional controls: a reviewer reads another line than the parser -----------------------

BIDI = [
    "\u202e",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
]


@pytest.mark.parametrize("char", BIDI, ids=[f"U+{ord(c):04X}" for c in BIDI])
def test_a_bidi_control_in_a_comment_is_refused_with_its_line_and_column(tmp_path, char):
    text = _dev_text().replace("stage: dev", f"stage: dev  # {char}note", 1)
    path = write_stage(tmp_path, text, name="dev")
    line_no = text[: text.index(char)].count("\n") + 1
    column = text.index(char) - text.rfind("\n", 0, text.index(char))
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert str(caught.value).startswith(f"{path}: (file): line {line_no}, column {column}: U+{ord(char):04X} ")


@pytest.mark.parametrize(
    "text",
    [
        'stage: dev\ntags: {owner: "team\u202e"}\n',  # in a value
        "stage: dev\ntags: {\u2067owner: team}\n",  # in a key
        "stage: dev\n# access granted \u2066\u2069 to admins\n",  # in a comment the parser never reads
    ],
    ids=["value", "key", "comment"],
)
def test_a_bidi_control_anywhere_exits_2_in_one_line(tmp_path, text, capsys):
    path = write_stage(tmp_path, text, name="dev")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "an invisible bidirectional control" in err and "(file): line " in err, err
