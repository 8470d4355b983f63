"""InferenceStage: a stage's warnings (config/rules stage_warnings) reach `cdk synth` as CDK warning annotations of
its cluster stack, recorded in the cloud assembly (which the CLI prints them from), not in any template; each
stack's props are built once per stage (stacks/stage.py), a value two consumers need handed on, not derived again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import load_stage_file
from config.rules import stage_warnings

from ..helpers import merge, stage_data, synth, write_stage

UNPINNED = "not pinned: EKS picks it when the add-on is created"


def _assembly_warnings(assembly: Path) -> dict[str, list[str]]:
    """{construct path: warning texts} of every stack of a stage's cloud assembly (inline or in its metadata file)."""
    found: dict[str, list[str]] = {}
    for artifact in json.loads((assembly / "manifest.json").read_text())["artifacts"].values():
        metadata = dict(artifact.get("metadata") or {})
        if "additionalMetadataFile" in artifact:
            metadata.update(json.loads((assembly / artifact["additionalMetadataFile"]).read_text()))
        for path, entries in metadata.items():
            texts = [entry["data"] for entry in entries if entry["type"] == "aws:cdk:warning"]
            if texts:
                found.setdefault(path, []).extend(texts)
    return found


def test_a_stages_warnings_are_annotations_of_its_cluster_stack(tmp_path):
    # dev.yaml copied as staging.yaml, tag and all, with two GPU nodes more than its replicas take.
    data = merge(stage_data("dev"), {"stage": "staging", "gpu_nodegroup": {"count": 4}})
    cfg = load_stage_file(write_stage(tmp_path, data), warn=lambda line: None)
    warned = stage_warnings(cfg)
    assert [w.id for w in warned] == ["pd-inference:stage-tag", "pd-inference:idle-gpus"]
    synth([cfg], tmp_path / "out")
    assert _assembly_warnings(tmp_path / "out" / "assembly-staging") == {
        "/staging/Cluster": [f"{w.field}: {w.problem} [ack: {w.id}]" for w in warned]
    }


def test_the_review_copy_holds_the_serve_config_the_chart_embeds(app_synth):
    stage = app_synth.stages["dev"]
    assert stage.rendering().serve_config is stage.serving.props.chart.serve_config


def template_addons(result, stage: str) -> list[dict]:
    """Every AWS::EKS::Addon of the stage's templates, as the review copy lists one."""
    return [
        {
            "addon": res["Properties"]["AddonName"],
            "stack": f"{stage}-{part}",
            "version": res["Properties"].get("AddonVersion", UNPINNED),
            **(
                {"configuration": json.loads(res["Properties"]["ConfigurationValues"])}
                if "ConfigurationValues" in res["Properties"]
                else {}
            ),
        }
        for part in ("cluster", "serving")
        for res in result.resources(stage, part, "AWS::EKS::Addon").values()
    ]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_review_lists_every_eks_addon_the_templates_create(app_synth, stage):
    assert app_synth.stages[stage].rendering().eks_addons == template_addons(app_synth, stage)
