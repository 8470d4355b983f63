"""checkov on every synthesized template and on the rendered Kubernetes YAML of every stage, plus the
RayService's head and worker pod templates scanned as Pods (checkov skips custom kinds). Zero failed
checks except those in security/checkov-acknowledgments.yaml, each with its reason; no stale ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from charts import render

from .helpers import ROOT

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
ACKS = yaml.safe_load((ROOT / "security" / "checkov-acknowledgments.yaml").read_text())


def _checkov(directory: Path, framework: str) -> dict:
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    run = subprocess.run(
        [str(CHECKOV), "-d", str(directory), "--framework", framework, "--compact", "--quiet", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert run.stdout.strip(), run.stderr[-2000:]
    result = json.loads(run.stdout)
    result = result[0] if isinstance(result, list) else result
    if not result.get("results"):  # checkov prints only a summary when everything passed
        result["results"] = {"failed_checks": []}
    return result


def pods_of(ray_service: dict) -> list[dict]:
    cluster = ray_service["spec"]["rayClusterConfig"]
    groups = [("head", cluster["headGroupSpec"])] + [("worker", g) for g in cluster["workerGroupSpecs"]]
    name, namespace = ray_service["metadata"]["name"], ray_service["metadata"]["namespace"]
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{name}-{kind}", "namespace": namespace, **group["template"].get("metadata", {})},
            "spec": group["template"]["spec"],
        }
        for kind, group in groups
    ]


@pytest.fixture(scope="module")
def scans(app_synth, tmp_path_factory):
    k8s = tmp_path_factory.mktemp("k8s")
    rendered = render.write(tmp_path_factory.mktemp("rendered"), [s.rendering() for s in app_synth.stages.values()])
    for stage_dir in rendered.iterdir():
        objects = list(yaml.safe_load_all((stage_dir / "inference.yaml").read_text()))
        (k8s / f"{stage_dir.name}-inference.yaml").write_text(yaml.safe_dump_all(objects))
        (ray_service,) = [o for o in objects if o["kind"] == "RayService"]
        (k8s / f"{stage_dir.name}-ray-pods.yaml").write_text(yaml.safe_dump_all(pods_of(ray_service)))
    templates = tmp_path_factory.mktemp("templates")
    for template in app_synth.outdir.glob("assembly-*/*.template.json"):
        (templates / f"{template.parent.name}-{template.name}").write_text(template.read_text())
    return {"cloudformation": _checkov(templates, "cloudformation"), "kubernetes": _checkov(k8s, "kubernetes")}


def _unacknowledged(result: dict, framework: str) -> list[str]:
    acks = ACKS[framework]
    return [
        f"{f['check_id']} {f['resource']} ({f['file_path']})"
        for f in result["results"]["failed_checks"]
        if not any(a["check"] == f["check_id"] and re.search(a["resource"], f["resource"]) for a in acks)
    ]


@pytest.mark.parametrize("framework", ["cloudformation", "kubernetes"])
def test_no_unacknowledged_checkov_failures(scans, framework):
    result = scans[framework]
    assert _unacknowledged(result, framework) == []
    assert result["summary"]["parsing_errors"] == 0
    print(
        f"checkov {framework}: {result['summary']['passed']} passed, {result['summary']['failed']} failed "
        f"(all acknowledged)"
    )


@pytest.mark.parametrize("framework", ["cloudformation", "kubernetes"])
def test_every_acknowledgment_still_matches_a_finding(scans, framework):
    failed = scans[framework]["results"]["failed_checks"]
    stale = [
        a
        for a in ACKS[framework]
        if not any(a["check"] == f["check_id"] and re.search(a["resource"], f["resource"]) for f in failed)
    ]
    assert stale == []
    assert all(len(a["reason"]) > 40 for a in ACKS[framework])


def test_the_pods_are_actually_scanned(scans):
    # --quiet lists failed checks only; both pods have (acknowledged) findings, so both were scanned
    pods = {c["resource"] for c in scans["kubernetes"]["results"]["failed_checks"] if c["resource"].startswith("Pod.")}
    assert pods == {"Pod.inference.ray-llm-head", "Pod.inference.ray-llm-worker"}


def test_checkov_fails_a_planted_finding(tmp_path):
    (tmp_path / "bad.template.json").write_text(
        json.dumps(
            {"Resources": {"Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"AccessControl": "PublicReadWrite"}}}}
        )
    )
    result = _checkov(tmp_path, "cloudformation")
    assert "CKV_AWS_20" in {f["check_id"] for f in result["results"]["failed_checks"]}
