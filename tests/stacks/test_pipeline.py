"""The optional delivery pipeline: built only with config/_pipeline.yaml; stage order, approval
placement and a verify step after every stage; cdk-nag and cfn-lint clean."""

from __future__ import annotations

import json
import shutil

import pytest

from config import ConfigError, load_stages
from config.loader import CONFIG_DIR
from config.pipeline import load_pipeline
from stacks import assembly

from ..helpers import ROOT
from ..test_cfn_lint import _accepted, _lint


@pytest.fixture(scope="module")
def pipeline_app(tmp_path_factory):
    folder = tmp_path_factory.mktemp("config")
    for stage in ("dev", "prod"):
        shutil.copy(CONFIG_DIR / f"{stage}.yaml", folder)
    shutil.copy(ROOT / "docs" / "pipeline.example.yaml", folder / "_pipeline.yaml")
    stages = load_stages(folder)
    pipeline = load_pipeline(folder, [s.stage for s in stages])
    out = tmp_path_factory.mktemp("out")
    app = assembly.new_app(outdir=str(out))
    assembly.build(app, stages, nag=True, pipeline=pipeline)  # cdk-nag on: synth fails on a new finding
    app.synth()
    return json.loads((out / "Pipeline.template.json").read_text()), out


def _stages(template):
    (pipeline,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CodePipeline::Pipeline"]
    return pipeline["Properties"]["Stages"]


def _actions(stage):
    return [(a["Name"], a["ActionTypeId"]["Category"], a.get("RunOrder", 1)) for a in stage["Actions"]]


def test_no_pipeline_without_its_config(stages):
    assert load_pipeline(CONFIG_DIR, list(stages)) is None


def test_stages_deploy_in_config_order_after_source_synth_and_self_update(pipeline_app):
    names = [stage["Name"] for stage in _stages(pipeline_app[0])]
    assert names == ["Source", "Build", "UpdatePipeline", "Assets", "dev", "prod"]


def test_manual_approval_only_before_prod(pipeline_app):
    by_name = {stage["Name"]: stage for stage in _stages(pipeline_app[0])}
    dev, prod = _actions(by_name["dev"]), _actions(by_name["prod"])
    assert not [a for a in dev if a[1] == "Approval"]
    approvals = [a for a in prod if a[1] == "Approval"]
    assert [a[0] for a in approvals] == ["Approve-prod"]
    first_deploy = min(a[2] for a in prod if a[1] == "Deploy")
    assert approvals[0][2] < first_deploy  # before any of prod's stacks deploys


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_verify_runs_after_every_stack_of_the_stage(pipeline_app, stage):
    actions = _actions({s["Name"]: s for s in _stages(pipeline_app[0])}[stage])
    verify = [a for a in actions if a[0] == f"Verify-{stage}"]
    assert len(verify) == 1 and verify[0][1] == "Build"
    assert verify[0][2] > max(a[2] for a in actions if a[1] == "Deploy")


def test_synth_step_runs_the_test_command_then_synth(pipeline_app):
    template = pipeline_app[0]
    projects = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::CodeBuild::Project"]
    specs = [json.loads(p["Source"]["BuildSpec"]) for p in projects if "BuildSpec" in p["Source"]]
    synth = [s for s in specs if "scripts/test.sh" in json.dumps(s)]
    assert len(synth) == 1
    commands = synth[0]["phases"]["build"]["commands"]
    assert commands == ["scripts/test.sh", "npx --no-install cdk synth --quiet"]


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
