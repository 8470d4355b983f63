"""The GitHub Actions workflows: valid against the workflow schema (check-jsonschema's vendored copy,
offline), and doing what the README says: the PR job runs the test command and posts the offline diff;
the main job deploys dev with preflight before and verify after.

They are also held to a supply-chain and injection bar: every action pinned to a full commit SHA with
its release in a comment, no `${{ }}` expression inside a `run:` script (values reach the shell through
`env:`), no persisted git credentials, the OIDC token only in the deploy job, Node.js 24 LTS, and zizmor
(offline, auditor persona, no ignore comments or config honoured) reporting nothing at high severity.
A planted bad workflow shows that both the pin check and zizmor do find what they look for."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .helpers import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
ALL_WORKFLOWS = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
NODE_LTS = "24"

# `uses: owner/repo[/path]@<40 hex> # vX.Y.Z`, the form every non-local action must take.
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)\s*(?:#\s*(?P<comment>.*?))?\s*$")
RELEASE = re.compile(r"^v\d+\.\d+\.\d+$")

# A workflow with the two defects the issue is about: a tag-pinned action and an expression expanded
# inside a run script.
BAD_WORKFLOW = """\
name: bad
on: pull_request
permissions:
  contents: read
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
"""


def _check(paths):
    tool = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run(
        [str(tool), "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _zizmor(paths, min_severity="high"):
    """zizmor's findings (JSON v1) for the given workflow files: offline, the auditor persona (every
    audit, false positives included), ignore comments and config files not honoured, and a file that
    does not parse is an error rather than a skipped input."""
    tool = Path(sys.executable).parent / "zizmor"
    run = subprocess.run(
        [
            str(tool),
            "--offline",
            "--persona=auditor",
            f"--min-severity={min_severity}",
            "--no-config",
            "--no-ignores",
            "--strict-collection",
            "--format=json",
            "--no-exit-codes",
            "--no-progress",
            "--color=never",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def _summary(findings):
    return [
        (
            f["ident"],
            f["determinations"]["severity"],
            sorted(
                {
                    loc["symbolic"]["key"]["Local"]["verbatim_path"]
                    for loc in f["locations"]
                    if "Local" in loc["symbolic"]["key"]
                }
            ),
        )
        for f in findings
    ]


def _steps(name):
    """A workflow and the run scripts of all its jobs' steps (pr.yml: the tests, and the gate job)."""
    workflow = yaml.safe_load((WORKFLOWS / name).read_text())
    return workflow, [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]


def _all_steps():
    for path in ALL_WORKFLOWS:
        for job_id, job in yaml.safe_load(path.read_text())["jobs"].items():
            for step in job.get("steps", []):
                yield path.name, job_id, step


def _uses_problems(text):
    """Every `uses:` of a workflow's text that is not a full-SHA pin with a `# vX.Y.Z` comment, and every
    `uses:` the YAML holds that no `uses:` line accounts for (flow style, anchors)."""
    problems, seen = [], set()
    for number, line in enumerate(text.splitlines(), 1):
        match = USES_LINE.match(line)
        if not match:
            continue
        ref, comment = match["ref"], (match["comment"] or "").strip()
        seen.add(ref)
        if ref.startswith("./"):
            continue  # an action in this repository: pinned by the commit being run
        if not PINNED.match(ref):
            problems.append(f"line {number}: {ref} is not pinned to a full commit SHA")
        elif not RELEASE.match(comment):
            problems.append(f"line {number}: {ref} needs its release as a comment (# vX.Y.Z), has {comment!r}")
    workflow = yaml.safe_load(text)
    for job in workflow["jobs"].values():
        for uses in [job.get("uses")] + [step.get("uses") for step in job.get("steps", [])]:
            if uses and uses not in seen:
                problems.append(f"{uses} is not on a `uses:` line of its own")
    return problems


def test_workflows_validate_against_the_github_schema():
    run = _check(ALL_WORKFLOWS)
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
    assert '--base "$BASE_SHA"' in diff and '--markdown "$RUNNER_TEMP/diff.md"' in diff
    assert 'cat "$RUNNER_TEMP/diff.md" >> "$GITHUB_STEP_SUMMARY"' in diff and "--fail-on-danger" in diff
    (gate,) = [s for s in workflow["jobs"]["diff-gate"]["steps"] if s.get("id") == "gate"]
    assert gate["env"]["BASE_REF"] == "${{ github.base_ref }}"  # the target branch, as data


def _gate_steps():
    """The gate job's steps: the one that checks out the gate's code, the one that runs `ops diff`."""
    workflow = yaml.safe_load((WORKFLOWS / "pr.yml").read_text())
    steps = workflow["jobs"]["diff-gate"]["steps"]
    (runs,) = [i for i, step in enumerate(steps) if "-m ops diff" in step.get("run", "")]
    (checkout,) = [i for i, step in enumerate(steps) if "worktree add" in step.get("run", "")]
    return steps, checkout, runs


def test_the_danger_gate_runs_the_base_branchs_diff_code_not_the_pull_requests():
    """A pull request can edit ops/diff.py; the gate that judges it must be the target branch's code. The
    base commit is checked out into a folder outside the PR's checkout, `ops diff` runs from there (python
    -m puts the working directory first on sys.path, so `ops` is the base's), and the PR's checkout is
    only the tree it compares (--tree)."""
    steps, checkout, runs = _gate_steps()
    gate, diff = steps[checkout], steps[runs]
    assert checkout < runs
    # the checkout step: the target branch's commit, in a worktree outside the PR's checkout, hooks off
    script = gate["run"]
    assert 'base_sha=$(git rev-parse --verify "origin/$BASE_REF^{commit}")' in script
    assert 'git -c core.hooksPath=/dev/null worktree add --detach "$RUNNER_TEMP/diff-gate" "$base_sha"' in script
    assert 'echo "sha=$base_sha" >> "$GITHUB_OUTPUT"' in script
    # the gate step runs in that worktree, and compares the PR's checkout with that same commit
    assert diff["working-directory"] == "${{ runner.temp }}/diff-gate"
    assert diff["env"]["BASE_SHA"] == f"${{{{ steps.{gate['id']}.outputs.sha }}}}"
    (command,) = [line for line in diff["run"].splitlines() if "-m ops diff" in line]
    # the gate's own venv, built by the base's setup.sh in the gate's worktree, never the PR's .venv
    assert command.strip().startswith('"$RUNNER_TEMP/diff-gate/.venv/bin/python" -m ops diff ')
    assert '--base "$BASE_SHA"' in command and '--tree "$GITHUB_WORKSPACE"' in command
    assert "--run-tree-code" in command  # the PR's code synthesized, sandboxed (ops/diff/synth.py)
    (setup,) = [i for i, step in enumerate(steps) if "scripts/setup.sh" in step.get("run", "")]
    assert checkout < setup < runs and steps[setup]["working-directory"] == "${{ runner.temp }}/diff-gate"
    # the job runs no code of the PR's outside the sandbox: no test command, no venv of its checkout
    assert all("scripts/test.sh" not in step.get("run", "") for step in steps)
    assert all("GITHUB_WORKSPACE/.venv" not in step.get("run", "") for step in steps)
    # nothing in the step runs the PR's own ops code: no `cd` back into the checkout, no PYTHONPATH to it
    assert "cd " not in diff["run"] and "PYTHONPATH" not in diff["run"] and "PYTHONPATH" not in diff["env"]
    assert ".venv/bin/python -m ops" not in diff["run"].replace('"$RUNNER_TEMP/diff-gate/.venv/bin/python" -m ops', "")
    # and no later step runs `ops diff` from the PR's checkout
    assert all("ops diff" not in step.get("run", "") for step in steps[runs + 1 :])


def test_the_danger_gate_reads_the_tree_option_that_ops_diff_has():
    """The option the workflow passes exists (the base branch must have it: see ops/diff.py add_parser)."""
    import argparse

    from ops import diff as diff_module

    parser = argparse.ArgumentParser()
    diff_module.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        ["diff", "--base", "abc123", "--tree", "/checkout", "--markdown", "/tmp/d.md", "--fail-on-danger"]
    )
    assert (args.base, args.tree, args.markdown, args.fail_on_danger) == ("abc123", "/checkout", "/tmp/d.md", True)


@pytest.mark.parametrize(
    "command",
    [
        ".venv/bin/python -m ops preflight --stage dev",
        "npx --no-install cdk deploy -c stage=dev 'dev/*' --require-approval never",
        ".venv/bin/python -m ops verify-remote --stage dev",
    ],
)
def test_main_job_deploys_dev_between_preflight_and_verify(command):
    _, runs = _steps("deploy.yml")
    assert command in runs
    order = [
        runs.index(c)
        for c in (
            ".venv/bin/python -m ops preflight --stage dev",
            "npx --no-install cdk deploy -c stage=dev 'dev/*' --require-approval never",
            ".venv/bin/python -m ops verify-remote --stage dev",
        )
    ]
    assert order == sorted(order)


def test_readme_test_command_is_what_ci_runs():
    """.ci/run ends in `exec scripts/test.sh`; the README's first command block gives that very command as the
    one that runs the tests (the line's command is exactly scripts/test.sh, its comment says what it does), and
    the README says that CI runs exactly it."""
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1] == "exec scripts/test.sh"
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^```bash\n(.*?)^```$", readme, re.DOTALL | re.MULTILINE)
    assert block, "README.md has no ```bash block"
    commands = {}
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        commands[command.strip()] = comment.strip()
    assert commands.get("scripts/test.sh", "").startswith("tests: set up"), commands
    assert "`.ci/run` runs exactly `scripts/test.sh`." in readme


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit_with_its_release(path):
    assert _uses_problems(path.read_text()) == []


def test_pin_check_rejects_a_tag_a_short_sha_and_a_missing_release():
    problems = _uses_problems(
        BAD_WORKFLOW.replace(
            "      - run:",
            "      - uses: actions/setup-node@49933ea\n"
            "      - uses: actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97\n"
            "      - run:",
        )
    )
    assert len(problems) == 3, problems
    assert "actions/checkout@v4 is not pinned" in problems[0]


def test_each_action_is_pinned_to_one_commit_everywhere():
    pins = {}
    for _, _, step in _all_steps():
        if "uses" in step:
            action, _, sha = step["uses"].partition("@")
            pins.setdefault(action, set()).add(sha)
    assert pins and all(len(shas) == 1 for shas in pins.values()), pins


def test_no_expression_is_expanded_inside_a_run_script():
    """`${{ }}` in a script is substituted into its text before the shell sees it; values go through
    `env:` and are read as variables."""
    offending = [
        (name, job, step.get("name", step["run"][:40]))
        for name, job, step in _all_steps()
        if "${{" in step.get("run", "")
    ]
    assert offending == []


def test_checkouts_do_not_persist_git_credentials():
    checkouts = [(name, step) for name, _, step in _all_steps() if step.get("uses", "").startswith("actions/checkout@")]
    assert {name for name, _ in checkouts} == {"deploy.yml", "pr.yml"}
    assert all(step.get("with", {}).get("persist-credentials") is False for _, step in checkouts), checkouts


def test_only_the_deploy_job_can_get_an_oidc_token():
    deploy = yaml.safe_load((WORKFLOWS / "deploy.yml").read_text())
    assert deploy["permissions"] == {}
    assert deploy["jobs"]["deploy"]["permissions"] == {"contents": "read", "id-token": "write"}
    pr = yaml.safe_load((WORKFLOWS / "pr.yml").read_text())
    assert pr["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in pr["jobs"].values())


def test_ci_runs_node_24_lts_as_the_readme_says():
    versions = {
        (name, str(step["with"]["node-version"]))
        for name, _, step in _all_steps()
        if step.get("uses", "").startswith("actions/setup-node@")
    }
    assert {name for name, _ in versions} >= {"deploy.yml", "pr.yml"}
    assert {version for _, version in versions} == {NODE_LTS}, versions
    assert f"CI uses {NODE_LTS} LTS" in (ROOT / "README.md").read_text()


def test_zizmor_reports_nothing_at_high_severity():
    findings = _zizmor(ALL_WORKFLOWS)
    assert findings == [], _summary(findings)


def test_zizmor_flags_a_planted_bad_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW)
    found = {(ident, severity) for ident, severity, _ in _summary(_zizmor([bad]))}
    assert {("unpinned-uses", "High"), ("template-injection", "High")} <= found, found
