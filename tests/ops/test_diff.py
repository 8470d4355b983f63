"""`python -m ops diff --base REF`: each test changes a temporary clone of this repository, commits or
leaves the change in the working tree, and reads the summary: what changed, what is replaced, dangers
first, and the exit code under --fail-on-danger. No AWS access: both synths run without credentials."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ops.__main__ import main
from ops.diff import ResourceChange, resource_changes

from ..helpers import ROOT


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def clone(tmp_path):
    """This repository's committed state, with the project's node_modules and ../shared beside it."""
    repo = tmp_path / "main"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(repo)], check=True)
    for key, value in (("user.email", "test@example.invalid"), ("user.name", "test")):
        _git(repo, "config", key, value)
    (repo / "node_modules").symlink_to(ROOT / "node_modules")
    return repo


def _edit_stage(repo: Path, stage: str, change) -> None:
    path = repo / "config" / f"{stage}.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def diff(monkeypatch, capsys):
    """`python -m ops diff --base HEAD ...` run in the clone (this checkout's code, the clone's tree)."""
    def run(repo: Path, *extra: str, base: str = "HEAD") -> Run:
        monkeypatch.chdir(repo)
        code = main(["diff", "--base", base, *extra])
        out = capsys.readouterr()
        return Run(code, out.out, out.err)
    return run


def _summary(output: str, stack: str) -> str:
    line = next(l for l in output.splitlines() if l.strip().startswith(stack + " "))
    return line.split(None, 1)[1].strip()


def test_unchanged_tree_has_no_changes_and_no_dangers(clone, diff):
    run = diff(clone)
    assert run.returncode == 0, run.stderr
    assert "No replacement or deletion" in run.stdout
    assert _summary(run.stdout, "dev/Cluster") == "no changes"


def test_model_change_touches_only_the_serving_manifest(clone, diff, tmp_path):
    _edit_stage(clone, "dev", lambda d: d["serving"]["model"].update(id="llama-3.1-8b",
                                                                      source="meta-llama/Llama-3.1-8B-Instruct"))
    markdown = tmp_path / "diff.md"
    run = diff(clone, "--markdown", str(markdown), "--fail-on-danger")
    assert run.returncode == 0, run.stderr
    assert _summary(run.stdout, "dev/Network") == "no changes"
    assert _summary(run.stdout, "dev/Cluster") == "no changes"
    assert _summary(run.stdout, "dev/Serving") == "0 added, 1 changed, 0 removed, 0 replaced"
    assert _summary(run.stdout, "prod/Serving") == "no changes"
    assert "+            model_id: llama-3.1-8b" in run.stdout  # the readable YAML diff
    assert "--- CloudFormation: dev/Serving" in run.stdout      # `cdk diff --template` output ...
    assert max(len(line) for line in run.stdout.splitlines()) < 400  # ... without the manifest's one-line JSON
    text = markdown.read_text()
    assert "| dev | `dev/Serving` | 0 | 1 | 0 | 0 |" in text and "```diff" in text


def test_gpu_count_changes_the_nodegroup_in_place_and_the_ray_workers(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["gpu_nodegroup"].update(count=3))
    run = diff(clone, "--fail-on-danger")
    assert run.returncode == 0, run.stdout
    assert _summary(run.stdout, "dev/Cluster") == "0 added, 1 changed, 0 removed, 0 replaced"
    assert _summary(run.stdout, "dev/Serving") == "0 added, 1 changed, 0 removed, 0 replaced"
    assert "+      replicas: 3" in run.stdout


def test_kubernetes_upgrade_updates_the_cluster_in_place(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["cluster"].update(kubernetes_version="1.34"))
    _git(clone, "commit", "-qam", "base on 1.34")
    _edit_stage(clone, "dev", lambda d: d["cluster"].update(kubernetes_version="1.35"))
    run = diff(clone, "--fail-on-danger")
    assert run.returncode == 0, run.stdout
    assert "DANGER" not in run.stdout
    # the cluster is updated in place; only the kubectl layer (1.34 -> 1.35) is a new resource
    assert _summary(run.stdout, "dev/Cluster") == "0 added, 1 changed, 0 removed, 1 replaced"
    assert "[~] AWS::EKS::Cluster Cluster/Cluster ClusterEB0386A7\n └─ [~] Version" in run.stdout
    assert "[~] AWS::Lambda::LayerVersion Cluster/KubectlLayer KubectlLayer600207B5 replace" in run.stdout


def test_system_instance_type_change_is_a_nodegroup_replacement_and_a_danger(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["system_nodegroup"].update(instance_type="m7i.2xlarge"))
    run = diff(clone)
    assert run.returncode == 0  # reported, but only --fail-on-danger fails on it
    lines = run.stdout.splitlines()
    assert lines[1] == "DANGER: 1 destructive change(s)"
    assert lines[2].startswith("  ! dev/Cluster: nodegroup ClusterNodegroupSystemNodegroup")
    assert lines[2].endswith("replaced (InstanceTypes)")
    assert _summary(run.stdout, "dev/Cluster") == "0 added, 0 changed, 0 removed, 1 replaced"
    assert diff(clone, "--fail-on-danger").returncode == 1


def test_gpu_instance_type_change_rolls_every_gpu_node(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["gpu_nodegroup"].update(instance_type="g6.16xlarge"))
    run = diff(clone, "--fail-on-danger")
    assert run.returncode == 1
    assert "nodegroup ClusterNodegroupGpuNodegroup8D13555C: every node is replaced (rolling) " \
           "(launch template GpuLaunchTemplate)" in run.stdout


def test_unknown_base_is_one_line_and_exit_2(clone, diff):
    run = diff(clone, base="no-such-ref")
    assert run.returncode == 2
    assert run.stderr.strip() == "diff: 'no-such-ref' is not a commit in this repository"


# --- the replacement analysis on its own ----------------------------------------------------------------

def _template(resource_type, **props):
    return {"Resources": {"R": {"Type": resource_type, "Properties": props}}}


@pytest.mark.parametrize("resource_type, before, after, action", [
    ("AWS::EKS::Cluster", {"Version": "1.34"}, {"Version": "1.35"}, "changed"),
    ("AWS::EKS::Cluster", {"Name": "a"}, {"Name": "b"}, "replaced"),
    ("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"}, {"CidrBlock": "10.1.0.0/16"}, "replaced"),
    ("AWS::EKS::Nodegroup", {"ScalingConfig": {"DesiredSize": 2}}, {"ScalingConfig": {"DesiredSize": 3}}, "changed"),
    ("AWS::EKS::Nodegroup", {"Subnets": ["a"]}, {"Subnets": ["b"]}, "replaced"),
])
def test_replacement_follows_cloudformation_create_only_properties(resource_type, before, after, action):
    (change,) = resource_changes(_template(resource_type, **before), _template(resource_type, **after))
    assert change.action == action


def test_removing_the_kms_key_is_a_danger():
    (change,) = resource_changes(_template("AWS::KMS::Key"), {"Resources": {}})
    assert change == ResourceChange("R", "AWS::KMS::Key", "removed") and change.dangerous
