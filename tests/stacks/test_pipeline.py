"""The optional delivery pipeline: built only with config/_pipeline.yaml; stage order, approval
placement and a verify step after every stage; cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from config import ConfigError, load_stages, versions
from config.loader import CONFIG_DIR
from config.pipeline import load_pipeline
from stacks import assembly

from ..helpers import ROOT
from ..test_cfn_lint import _accepted, _lint
from . import codebuild_local

EXAMPLE = ROOT / "docs" / "pipeline.example.yaml"
EXAMPLE_CONNECTION = "arn:aws:codeconnections:us-west-2:123456789012:connection/00000000-0000-0000-0000-000000000000"
CODESTAR_CONNECTION = EXAMPLE_CONNECTION.replace(":codeconnections:", ":codestar-connections:")


def _synth(tmp_path_factory, *, nag: bool, connection_arn: str = EXAMPLE_CONNECTION):
    """The pipeline stack's template and the assembly folder, for dev and prod and the example pipeline file
    (its connection ARN replaced by `connection_arn`)."""
    folder = tmp_path_factory.mktemp("config")
    for stage in ("dev", "prod"):
        shutil.copy(CONFIG_DIR / f"{stage}.yaml", folder)
    (folder / "_pipeline.yaml").write_text(EXAMPLE.read_text().replace(EXAMPLE_CONNECTION, connection_arn))
    stages = load_stages(folder)
    pipeline = load_pipeline(folder, [s.stage for s in stages])
    out = tmp_path_factory.mktemp("out")
    app = assembly.new_app(outdir=str(out))
    assembly.build(app, stages, nag=nag, pipeline=pipeline)
    app.synth()
    return json.loads((out / "Pipeline.template.json").read_text()), out


@pytest.fixture(scope="module")
def pipeline_app(tmp_path_factory):
    return _synth(tmp_path_factory, nag=True)  # cdk-nag on: synth fails on a new finding


def _connection_grants(template, connection_arn: str) -> dict[str, set[str]]:
    """Each IAM policy that grants a UseConnection on the connection, with the UseConnection actions it grants."""
    grants: dict[str, set[str]] = {}
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if statement["Resource"] == connection_arn:
                grants.setdefault(name, set()).update(a for a in actions if a.endswith(":UseConnection"))
    return grants


# The roles that use the connection: the source action's, and each project that takes the full clone (Synth,
# AddonCheck, Verify per stage, Diff and Record for the approval stage).
CONNECTION_USERS = 7


def _stages(template):
    (pipeline,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    return pipeline["Properties"]["Stages"]


def test_the_pipeline_is_a_v2_pipeline(pipeline_app):
    (pipeline,) = [r for r in pipeline_app[0]["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    assert pipeline["Properties"]["PipelineType"] == "V2"


def _actions(stage):
    return [(a["Name"], a["ActionTypeId"]["Category"], a.get("RunOrder", 1)) for a in stage["Actions"]]


def test_no_pipeline_without_its_config(stages, tmp_path):
    # A folder of stage files alone (a repository that uses the pipeline has config/_pipeline.yaml).
    for stage in stages:
        shutil.copy(CONFIG_DIR / f"{stage}.yaml", tmp_path)
    assert load_pipeline(tmp_path, list(stages)) is None


def test_stages_deploy_in_config_order_after_source_synth_and_self_update(pipeline_app):
    names = [stage["Name"] for stage in _stages(pipeline_app[0])]
    assert names == ["Source", "Build", "UpdatePipeline", "Assets", "dev", "prod"]


def test_manual_approvals_only_in_prod(pipeline_app):
    by_name = {stage["Name"]: stage for stage in _stages(pipeline_app[0])}
    dev, prod = _actions(by_name["dev"]), _actions(by_name["prod"])
    assert not [a for a in dev if a[1] == "Approval"]
    assert [a[0] for a in prod if a[1] == "Approval"] == [
        "network.Approve-prod-network",
        "cluster.Approve-prod-cluster",
        "serving.Approve-prod-serving",
    ]


@pytest.mark.parametrize("stack", ["network", "cluster", "serving"])
def test_each_prod_stack_is_approved_after_its_change_set_and_before_it_runs(pipeline_app, stack):
    order = {name: run for name, _, run in _actions({s["Name"]: s for s in _stages(pipeline_app[0])}["prod"])}
    assert order[f"{stack}.Prepare"] < order[f"{stack}.Approve-prod-{stack}"] < order[f"{stack}.Deploy"]


def test_the_prod_diff_runs_before_any_change_set_and_the_approvals_link_it(pipeline_app):
    prod = {s["Name"]: s for s in _stages(pipeline_app[0])}["prod"]
    order = {name: run for name, _, run in _actions(prod)}
    assert order["Diff-prod"] < min(run for name, run in order.items() if name.endswith(".Prepare"))
    approvals = [a for a in prod["Actions"] if a["ActionTypeId"]["Category"] == "Approval"]
    link = "https://us-west-2.console.aws.amazon.com/codesuite/codebuild/projects/pd-inference-diff-prod/history"
    assert {a["Configuration"]["ExternalEntityLink"] for a in approvals} == {f"{link}?region=us-west-2"}


def test_the_addon_check_runs_before_any_change_set_of_the_first_stage(pipeline_app):
    order = {name: run for name, _, run in _actions({s["Name"]: s for s in _stages(pipeline_app[0])}["dev"])}
    assert order["AddonCheck"] < min(run for name, run in order.items() if name.endswith(".Prepare"))


def test_the_addon_check_checks_every_stage_of_the_pipeline(pipeline_app):
    specs = codebuild_local.buildspecs(pipeline_app[0])
    (check,) = [s for s in specs.values() if any("ops addon-check" in c for c in codebuild_local.commands(s))]
    assert [c for c in codebuild_local.commands(check) if "ops addon-check" in c] == [
        ".venv/bin/python -m ops addon-check --stage dev",
        ".venv/bin/python -m ops addon-check --stage prod",
    ]


def test_the_prod_diff_compares_with_the_commit_prod_last_deployed(pipeline_app):
    specs = codebuild_local.buildspecs(pipeline_app[0])
    (diff,) = [s for s in specs.values() if any("ops diff --base" in c for c in codebuild_local.commands(s))]
    (record,) = [s for s in specs.values() if any("ssm put-parameter" in c for c in codebuild_local.commands(s))]
    assert any("aws ssm get-parameter --name" in c for c in codebuild_local.commands(diff))
    assert '--value "$CODEBUILD_RESOLVED_SOURCE_VERSION"' in " ".join(codebuild_local.commands(record))
    order = {name: run for name, _, run in _actions({s["Name"]: s for s in _stages(pipeline_app[0])}["prod"])}
    assert order["Record-prod"] > order["Verify-prod"]  # recorded only once verified


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_verify_runs_after_every_stack_of_the_stage(pipeline_app, stage):
    actions = _actions({s["Name"]: s for s in _stages(pipeline_app[0])}[stage])
    verify = [a for a in actions if a[0] == f"Verify-{stage}"]
    assert len(verify) == 1 and verify[0][1] == "Build"
    assert verify[0][2] > max(a[2] for a in actions if a[1] == "Deploy")


def _synth_spec(template):
    (synth,) = [
        s for s in codebuild_local.buildspecs(template).values() if "scripts/pipeline_check.sh" in json.dumps(s)
    ]
    return synth


def test_synth_step_checks_then_synthesizes_every_stage(pipeline_app):
    spec = _synth_spec(pipeline_app[0])
    assert spec["phases"]["install"]["commands"] == ["scripts/setup.sh --checks"]
    assert spec["phases"]["build"]["commands"] == ["scripts/pipeline_check.sh", "scripts/cdk synth --quiet"]
    assert spec["artifacts"]["base-directory"] == "cdk.out"


def test_every_project_selects_the_project_toolchain_on_the_standard_8_image(pipeline_app):
    template = pipeline_app[0]
    for name, spec in codebuild_local.buildspecs(template).items():
        assert spec["phases"]["install"]["runtime-versions"] == versions.TOOLCHAIN, name
        assert codebuild_local.environments(template)[name]["Image"] == "aws/codebuild/standard:8.0", name


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def test_the_toolchain_is_the_projects_pins():
    # python: pyproject's requires-python; nodejs: the CI workflows' setup-node; golang: at least every `go`
    # line of tools/go/ (the oldest Go each module builds with).
    requires = re.search(r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text())
    workflows = (ROOT / ".github" / "workflows").glob("*.yml")
    nodes = {m for f in workflows for m in re.findall(r'node-version: "(\d+)"', f.read_text())}
    gos = [re.findall(r"^go (\d+\.\d+)", f.read_text(), re.MULTILINE) for f in (ROOT / "tools" / "go").glob("*/go.mod")]
    assert requires and requires.group(1) == versions.TOOLCHAIN["python"]
    assert nodes == {versions.TOOLCHAIN["nodejs"]}
    assert gos and all(len(g) == 1 and _minor(g[0]) <= _minor(versions.TOOLCHAIN["golang"]) for g in gos)


def test_every_npm_install_is_the_version_package_json_pins(pipeline_app):
    installs = [
        command
        for spec in codebuild_local.buildspecs(pipeline_app[0]).values()
        for command in codebuild_local.commands(spec)
        if command.startswith("npm install")
    ]
    assert installs  # the self-mutation and asset steps install the CDK CLI and cdk-assets
    for command in installs:
        (package,) = re.findall(r"(\S+)@(\S+)$", command)
        assert package[1] == versions.npm_pin(package[0]), command


def test_every_asset_manifest_a_step_publishes_is_in_the_synth_output(pipeline_app):
    paths = [
        path
        for spec in codebuild_local.buildspecs(pipeline_app[0]).values()
        for command in codebuild_local.commands(spec)
        for path in re.findall(r'cdk-assets --path "([^"]+)"', command)
    ]
    assert paths and all((pipeline_app[1] / path).is_file() for path in paths)


def test_self_mutation_deploys_a_stack_of_the_synth_output(pipeline_app):
    (command,) = [
        c
        for s in codebuild_local.buildspecs(pipeline_app[0]).values()
        for c in codebuild_local.commands(s)
        if c.startswith("cdk -a . deploy")
    ]
    stack = command.split()[4]
    assert stack in json.loads((pipeline_app[1] / "manifest.json").read_text())["artifacts"]


def test_synth_runs_on_a_size_that_holds_its_peak_memory(pipeline_app):
    environment = codebuild_local.environments(pipeline_app[0])
    (synth,) = [
        n
        for n, s in codebuild_local.buildspecs(pipeline_app[0]).items()
        if "scripts/pipeline_check.sh" in json.dumps(s)
    ]
    assert environment[synth]["ComputeType"] == "BUILD_GENERAL1_MEDIUM"  # 7 GB: the measured peak is above SMALL's 3 GB


def test_the_synth_buildspec_passes_in_a_fresh_clone(pipeline_app, tmp_path):
    clone = tmp_path / "source"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    # A repository with the pipeline has its config/_pipeline.yaml (the app builds the pipeline from it).
    shutil.copy(ROOT / "docs" / "pipeline.example.yaml", clone / "config" / "_pipeline.yaml")
    env = codebuild_local.codebuild_environment(clone, Path.home())
    build = codebuild_local.run_buildspec(_synth_spec(pipeline_app[0]), cwd=clone, env=env, timeout=2400)
    assert build.ok, build.output[-6000:]
    artifacts = json.loads((clone / "cdk.out" / "manifest.json").read_text())["artifacts"]
    assert {"Pipeline", "assembly-Pipeline-dev", "assembly-Pipeline-prod"} <= set(artifacts)
    print(f"Synth buildspec: {build.seconds}, peak RSS {build.peak_rss / 2**30:.2f} GiB")


def test_verify_step_runs_ops_verify_remote(pipeline_app):
    template = pipeline_app[0]
    text = json.dumps(template)
    for stage in ("dev", "prod"):
        assert f"python -m ops verify-remote --stage {stage}" in text
        assert f"project/pd-inference-{stage}-verify" in text


def test_pipeline_template_passes_cfn_lint(pipeline_app):
    findings = _lint([pipeline_app[1] / "Pipeline.template.json"])
    unexpected = [f"{m['Rule']['Id']} {m['Location']['Path'][:3]}" for m in findings if not _accepted(m)]
    assert unexpected == []


def test_pipeline_stage_must_have_a_stage_file(tmp_path, stages):
    (tmp_path / "_pipeline.yaml").write_text(
        (ROOT / "docs" / "pipeline.example.yaml").read_text().replace("- name: prod", "- name: qa")
    )
    with pytest.raises(ConfigError) as err:
        load_pipeline(tmp_path, list(stages))
    assert str(err.value) == (
        f"{tmp_path / '_pipeline.yaml'}: stages[1].name: 'qa' has no stage file (allowed: dev, prod)"
    )


def test_pipeline_file_is_not_a_stage(tmp_path):
    shutil.copy(CONFIG_DIR / "dev.yaml", tmp_path)
    shutil.copy(ROOT / "docs" / "pipeline.example.yaml", tmp_path / "_pipeline.yaml")
    assert [s.stage for s in load_stages(tmp_path)] == ["dev"]


def test_every_role_that_uses_a_codeconnections_connection_may(pipeline_app):
    grants = _connection_grants(pipeline_app[0], EXAMPLE_CONNECTION)
    assert len(grants) == CONNECTION_USERS
    assert all("codeconnections:UseConnection" in actions for actions in grants.values())


def test_a_codestar_connections_connection_is_granted_under_its_own_prefix_only(tmp_path_factory):
    template, _ = _synth(tmp_path_factory, nag=False, connection_arn=CODESTAR_CONNECTION)
    grants = _connection_grants(template, CODESTAR_CONNECTION)
    assert len(grants) == CONNECTION_USERS
    assert all(actions == {"codestar-connections:UseConnection"} for actions in grants.values())
