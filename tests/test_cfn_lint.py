"""cfn-lint on every synthesized template of every stage: zero errors; the only warnings accepted are
listed here, each with its reason and the resources it may apply to."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT

# (rule, resource name prefix, reason)
ACCEPTED_WARNINGS = [
    (
        "W3010",
        "Vpc",
        (
            "AZ names are literal on purpose: they come from the stage file so that synth and "
            'diff need no AWS lookup (docs/DECISIONS.md, "AZ names from the stage file, no lookups").'
        ),
    ),
    (
        "W3005",
        "ClusterKubectlProvider",
        "CDK's own kubectl provider adds a DependsOn that a GetAtt already implies; harmless and not ours to change.",
    ),
    ("W3005", "CustomVpcRestrictDefaultSG", "Same redundant DependsOn in CDK's default-SG custom resource."),
    (
        "W3005",
        "AddonsKubeRayCrdsHandler",
        "lambda.Function adds a DependsOn on the kubectl handler's role it shares, which its Role GetAtt implies.",
    ),
    (
        "W3005",
        "CustomS3AutoDeleteObjects",
        (
            "Same redundant DependsOn in CDK's auto-delete-objects custom "
            "resource (it empties the verify runner's bucket before a destroy)."
        ),
    ),
    ("W3005", "Pipeline", "The same redundant DependsOn in CDK Pipelines' generated pipeline."),
    (
        "E3703",
        "Pipeline",
        (
            "A style rule (prefer Fn::Sub to Fn::Join with an empty delimiter) that cfn-lint files "
            "as an error; CDK Pipelines builds its deploy actions' role ARNs that way."
        ),
    ),
]


def _lint(paths):
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    run = subprocess.run(
        [str(cfn_lint), "--format", "json", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    return json.loads(run.stdout or "[]")


def _accepted(match) -> bool:
    rule = match["Rule"]["Id"]
    path = match["Location"]["Path"]
    resource = path[1] if len(path) > 1 and path[0] == "Resources" else ""
    return any(rule == r and resource.startswith(prefix) for r, prefix, _ in ACCEPTED_WARNINGS)


def test_every_template_has_no_cfn_lint_errors_or_unlisted_warnings(app_synth):
    templates = sorted(app_synth.outdir.glob("assembly-*/*.template.json"))
    assert len(templates) == 6  # dev and prod: network, cluster, serving
    findings = _lint(templates)
    unexpected = [f"{m['Rule']['Id']} {m['Location']['Path']} {m['Message']}" for m in findings if not _accepted(m)]
    assert unexpected == []
    assert all(m["Level"] != "Error" for m in findings)


def test_cfn_lint_does_find_errors_when_there_are_some(tmp_path):
    """The check can fail: a template with a misspelt property is reported as an error."""
    bad = tmp_path / "bad.template.json"
    bad.write_text(
        json.dumps({"Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotaton": True}}}})
    )
    findings = _lint([bad])
    assert [m["Rule"]["Id"] for m in findings if m["Level"] == "Error"] == ["E3002"]
