"""The GitHub Actions workflows: valid against the workflow schema (check-jsonschema's vendored copy,
offline), and doing what the README says: the PR job runs the test command and posts the offline diff;
the main job deploys dev with preflight before and verify after."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .helpers import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"


def _check(paths):
    tool = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run([str(tool), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


def _steps(name):
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    (job,) = workflow["jobs"].values()
    return workflow, [step.get("run", "") for step in job["steps"]]


def test_workflows_validate_against_the_github_schema():
    run = _check(sorted(WORKFLOWS.glob("*.yml")))
    assert run.returncode == 0, run.stdout + run.stderr


def test_schema_check_rejects_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    stepz: []\n")
    assert _check([bad]).returncode != 0


def test_pr_job_runs_the_readme_test_command_and_posts_the_diff():
    workflow, runs = _steps("pr.yml")
    assert True in workflow and "pull_request" in workflow[True]  # YAML 1.1 reads `on` as True
    assert "scripts/test.sh" in runs
    diff = next(r for r in runs if "ops diff" in r)
    assert '--base "origin/${{ github.base_ref }}"' in diff and "--markdown diff.md" in diff
    assert 'cat diff.md >> "$GITHUB_STEP_SUMMARY"' in diff and "--fail-on-danger" in diff


@pytest.mark.parametrize("command", [".venv/bin/python -m ops preflight --stage dev",
                                     "npx --no-install cdk deploy -c stage=dev 'dev/*' --require-approval never",
                                     ".venv/bin/python -m ops verify-remote --stage dev"])
def test_main_job_deploys_dev_between_preflight_and_verify(command):
    _, runs = _steps("deploy.yml")
    assert command in runs
    order = [runs.index(c) for c in (".venv/bin/python -m ops preflight --stage dev",
                                     "npx --no-install cdk deploy -c stage=dev 'dev/*' --require-approval never",
                                     ".venv/bin/python -m ops verify-remote --stage dev")]
    assert order == sorted(order)


def test_readme_test_command_is_what_ci_runs():
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "exec scripts/test.sh"
    assert "scripts/test.sh      # set up" in (ROOT / "README.md").read_text()
