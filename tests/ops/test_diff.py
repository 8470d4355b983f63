"""`python -m ops diff --base REF`: each test changes a temporary clone of this repository, commits or
leaves the change in the working tree, and reads the summary: what changed, what is replaced, dangers
first, and the exit code under --fail-on-danger. No AWS access: both synths run without credentials."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ops.__main__ import main
from ops.diff import DiffResult, ResourceChange, StageDiff, cfn_diff, compare, notes, render, resource_changes, synth

from ..helpers import LARGER_MODEL_EXAMPLE, ROOT, merge, stage_data, write_stage


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


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
    # An ungated copy of Llama 3.1 8B: under meta-llama validation would want serving.hf_token_secret.
    _edit_stage(
        clone,
        "dev",
        lambda d: d["serving"]["model"].update(id="llama-3.1-8b-instruct", source="example-org/Llama-3.1-8B-Instruct"),
    )
    markdown = tmp_path / "diff.md"
    run = diff(clone, "--markdown", str(markdown), "--fail-on-danger")
    assert run.returncode == 0, run.stderr
    assert _summary(run.stdout, "dev/Network") == "no changes"
    assert _summary(run.stdout, "dev/Cluster") == "no changes"
    assert _summary(run.stdout, "dev/Serving") == "0 added, 1 changed, 0 removed, 0 replaced"
    assert _summary(run.stdout, "prod/Serving") == "no changes"
    assert "+            model_id: llama-3.1-8b-instruct\n" in run.stdout  # the readable YAML diff
    assert "MANUAL STEP" not in run.stdout and "IDLE GPUs" not in run.stdout  # serveConfigV2: applied in place
    assert "names another model" not in run.stderr  # the id matches the source: no warning
    assert "--- CloudFormation: dev/Serving" in run.stdout  # `cdk diff --template` output ...
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
    # KubeRay leaves replica counts out of the spec hash it compares: under None the third worker pod
    # does not start by itself, and prefill + decode (1 + 1) leave one of the three GPUs idle.
    assert (
        "  ! dev: RayService inference/ray-llm: rayClusterConfig changed (workerGroupSpecs[0].maxReplicas, "
        "workerGroupSpecs[0].minReplicas, workerGroupSpecs[0].replicas)" in run.stdout
    )
    assert (
        "IDLE GPUs: dev: 1 of 3 GPUs stay idle (3 x g6.8xlarge; replicas at most: prefill 1 x TP 1 + decode 1 x "
        "TP 1): raise the replica counts or lower gpu_nodegroup.count (base: 0 idle)" in run.stdout
    )


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
    # the nodegroups name no version: the deploy leaves them on 1.34, and the step to update them is printed
    assert (
        "  ! dev: Kubernetes 1.34 -> 1.35: the nodegroups ClusterNodegroupGpuNodegroup8D13555C, "
        "ClusterNodegroupSystemNodegroupBF67F25F stay on 1.34's kubelet" in run.stdout
    )


def test_kubernetes_downgrade_is_a_danger_eks_refuses(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["cluster"].update(kubernetes_version="1.34"))
    run = diff(clone, "--stage", "dev", "--fail-on-danger")
    assert run.returncode == 1, run.stdout
    assert run.stdout.splitlines()[1:3] == [
        "DANGER: 1 destructive change(s)",
        (
            "  ! dev/Cluster: cluster ClusterEB0386A7: EKS cannot downgrade a cluster (Kubernetes 1.35 -> 1.34): "
            "the deploy fails and rolls back"
        ),
    ]


def test_system_instance_type_change_is_a_nodegroup_replacement_and_a_danger(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["system_nodegroup"].update(instance_type="m7i.2xlarge"))
    run = diff(clone)
    assert run.returncode == 0  # reported, but only --fail-on-danger fails on it
    lines = run.stdout.splitlines()
    assert lines[1] == "DANGER: 1 destructive change(s)"
    assert lines[2].startswith("  ! dev/Cluster: nodegroup ClusterNodegroupSystemNodegroup")
    assert lines[2].endswith("replaced (InstanceTypes)")
    # 1 changed: the verify runner's wait, sized from the first start (config/first_start.py), which the
    # system nodes' instance type is part of
    assert _summary(run.stdout, "dev/Cluster") == "0 added, 1 changed, 0 removed, 1 replaced"
    assert diff(clone, "--fail-on-danger").returncode == 1


def test_gpu_instance_type_change_rolls_every_gpu_node(clone, diff):
    _edit_stage(clone, "dev", lambda d: d["gpu_nodegroup"].update(instance_type="g6.16xlarge"))
    run = diff(clone, "--fail-on-danger")
    assert run.returncode == 1
    assert (
        "nodegroup ClusterNodegroupGpuNodegroup8D13555C: every node is replaced (rolling) "
        "(launch template GpuLaunchTemplate)" in run.stdout
    )


def test_unknown_base_is_one_line_and_exit_2(clone, diff):
    run = diff(clone, base="no-such-ref")
    assert run.returncode == 2
    assert run.stderr.strip() == "diff: 'no-such-ref' is not a commit in this repository"


# --- the replacement analysis on its own ----------------------------------------------------------------


def _template(resource_type, **props):
    return {"Resources": {"R": {"Type": resource_type, "Properties": props}}}


@pytest.mark.parametrize(
    "resource_type, before, after, action",
    [
        ("AWS::EKS::Cluster", {"Version": "1.34"}, {"Version": "1.35"}, "changed"),
        ("AWS::EKS::Cluster", {"Name": "a"}, {"Name": "b"}, "replaced"),
        ("AWS::EC2::VPC", {"CidrBlock": "10.0.0.0/16"}, {"CidrBlock": "10.1.0.0/16"}, "replaced"),
        (
            "AWS::EKS::Nodegroup",
            {"ScalingConfig": {"DesiredSize": 2}},
            {"ScalingConfig": {"DesiredSize": 3}},
            "changed",
        ),
        ("AWS::EKS::Nodegroup", {"Subnets": ["a"]}, {"Subnets": ["b"]}, "replaced"),
    ],
)
def test_replacement_follows_cloudformation_create_only_properties(resource_type, before, after, action):
    (change,) = resource_changes(_template(resource_type, **before), _template(resource_type, **after))
    assert change.action == action


@pytest.mark.parametrize(
    "before, after, refused",
    [
        ("1.35", "1.34", "EKS cannot downgrade a cluster (Kubernetes 1.35 -> 1.34)"),
        ("1.33", "1.35", "EKS upgrades a cluster one minor version at a time (Kubernetes 1.33 -> 1.35)"),
    ],
)
def test_a_kubernetes_version_eks_refuses_is_a_danger(before, after, refused):
    (change,) = resource_changes(
        _template("AWS::EKS::Cluster", Version=before), _template("AWS::EKS::Cluster", Version=after)
    )
    assert change.dangerous and change.describe().startswith(f"cluster R: {refused}: the deploy fails and rolls back")


def test_one_minor_up_is_no_danger():
    (change,) = resource_changes(
        _template("AWS::EKS::Cluster", Version="1.34"), _template("AWS::EKS::Cluster", Version="1.35")
    )
    assert not change.dangerous


def test_removing_the_kms_key_is_a_danger():
    (change,) = resource_changes(_template("AWS::KMS::Key"), {"Resources": {}})
    assert change == ResourceChange("R", "AWS::KMS::Key", "removed") and change.dangerous


# --- the report: what is cut, notes, the stage's account ---------------------------------------------

# A row of `cdk diff`'s IAM table (a verify runner statement's condition; 307 characters, as printed)
IAM_ROW = (
    "│   │" + " " * 61 + "│        │ ec2:DeleteNetworkInterface           │" + " " * 41 + '│   "ec2:Vpc": '
    '"arn:aws:ec2:us-west-2:123456789012:vpc/{\\"Fn::ImportValue\\":\\"dev-network:ExportsOutputRefVpc8378EB38'
    '272D6E3A\\"}"' + " " * 21 + "│"
)


def test_an_iam_table_row_is_never_cut():
    assert len(IAM_ROW) == 307 and cfn_diff.shorten(IAM_ROW) == IAM_ROW


def test_the_serving_manifest_is_cut_and_points_at_the_kubernetes_diff():
    line = ' │   └─ [+] [{"apiVersion":"v1","kind":"Namespace",' + '"x":1,' * 3000 + "}]"
    assert (
        cfn_diff.shorten(line) == f"{line[:240]}... ({len(line)} characters; see the Kubernetes diff for what changed)"
    )


def test_notes_are_listed_after_the_dangers_one_line_each():
    stage = StageDiff("dev", [], {}, notes=["cluster access added: arn:aws:iam::111122223333:role/A gets X"])
    lines = render.text(DiffResult("HEAD (0123456789)", [stage])).splitlines()
    assert lines[2:4] == [
        "NOTE: 1 thing(s) to know before the deploy",
        "  - dev: cluster access added: arn:aws:iam::111122223333:role/A gets X",
    ]


@pytest.mark.parametrize(
    "environment, account",
    [("aws://123456789012/us-west-2", "123456789012"), ("aws://unknown-account/us-west-2", None)],
)
def test_the_stages_account_is_the_one_its_stacks_are_bound_to(environment, account, tmp_path):
    folder = tmp_path / "assembly-dev"
    folder.mkdir()
    manifest = {"artifacts": {"devCluster": {"type": "aws:cloudformation:stack", "environment": environment}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert synth.stage_account(tmp_path, "dev") == account


# --- Ray pods under upgradeStrategy None, idle GPUs, a stage of one side only -------------------------

KUBECTL = (
    "kubectl -n inference delete raycluster -l "
    "ray.io/originated-from-cr-name=ray-llm,ray.io/originated-from-crd=RayService"
)


def test_a_ray_pod_change_under_none_prints_the_manual_step(clone, diff, tmp_path):
    _edit_stage(clone, "dev", lambda d: d["serving"].update(worker_privilege="ipc_lock"))
    markdown = tmp_path / "diff.md"
    run = diff(clone, "--stage", "dev", "--markdown", str(markdown), "--fail-on-danger")
    assert run.returncode == 0, run.stderr  # a manual step, not a danger
    lines = run.stdout.splitlines()
    assert lines[2] == "MANUAL STEP: 1 change(s) the deploy does not roll out"
    step = lines[3]
    assert step.startswith(
        "  ! dev: RayService inference/ray-llm: rayClusterConfig changed (workerGroupSpecs[0]"
        ".template.spec.containers[0].securityContext."
    )
    assert "under upgradeStrategy None: KubeRay 1.6.2 neither updates nor replaces the running Ray pods" in step
    assert f"After the deploy, run `{KUBECTL}`" in step
    assert "> [!WARNING]" in markdown.read_text() and KUBECTL in markdown.read_text()


def _documents(path):
    return list(yaml.safe_load_all(path.read_text()))


def _k8s_out(tmp_path, name, stage, documents):
    folder = tmp_path / name / "k8s" / stage
    folder.mkdir(parents=True)
    (folder / "inference.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return tmp_path / name


def _ray_service(documents):
    return next(doc for doc in documents if doc and doc.get("kind") == "RayService")


SNAPSHOT = ROOT / "tests" / "snapshots" / "dev" / "inference.yaml"


@pytest.mark.parametrize(
    "change, path",
    [
        (
            lambda spec: spec["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0].update(
                image="x:2"
            ),
            "headGroupSpec.template.spec.containers[0].image",
        ),
        (
            lambda spec: spec["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0][
                "resources"
            ]["limits"].update(memory="100Gi"),
            "workerGroupSpecs[0].template.spec.containers[0].resources.limits.memory",
        ),
        (lambda spec: spec["rayClusterConfig"].update(rayVersion="2.59.0"), "rayVersion"),
        (
            lambda spec: spec["rayClusterConfig"]["workerGroupSpecs"][0].update(replicas=3),
            "workerGroupSpecs[0].replicas",
        ),
    ],
)
def test_every_ray_cluster_change_under_none_is_a_manual_step(change, path, tmp_path):
    base = _documents(SNAPSHOT)
    head = _documents(SNAPSHOT)
    change(_ray_service(head)["spec"])
    (step,) = notes.manual_steps(
        _k8s_out(tmp_path, "base", "dev", base), _k8s_out(tmp_path, "head", "dev", head), "dev"
    )
    assert (
        step.startswith(f"RayService inference/ray-llm: rayClusterConfig changed ({path}) under upgradeStrategy None")
        and KUBECTL in step
    )


@pytest.mark.parametrize(
    "change",
    [
        lambda spec: spec.update(serveConfigV2=spec["serveConfigV2"].replace("qwen3.5-9b", "llama")),  # in place
        lambda spec: (
            spec.update(upgradeStrategy={"type": "NewCluster"}),  # KubeRay rolls it out itself
            spec["rayClusterConfig"].update(rayVersion="2.59.0"),
        ),
        lambda spec: None,
    ],
)
def test_no_manual_step_when_kuberay_applies_the_change(change, tmp_path):
    base, head = _documents(SNAPSHOT), _documents(SNAPSHOT)
    change(_ray_service(head)["spec"])
    assert (
        notes.manual_steps(_k8s_out(tmp_path, "base", "dev", base), _k8s_out(tmp_path, "head", "dev", head), "dev")
        == []
    )


HELM_SNAPSHOT = ROOT / "tests" / "snapshots" / "dev" / "helm-releases.yaml"


def _releases_out(tmp_path, name, kuberay_version):
    documents = _documents(HELM_SNAPSHOT)
    next(d for d in documents if d["release"] == "kuberay-operator")["version"] = kuberay_version
    folder = tmp_path / name / "k8s" / "dev"
    folder.mkdir(parents=True)
    (folder / "helm-releases.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return tmp_path / name


def test_an_operator_bump_is_flagged_with_the_crd_step_and_the_rehearsal(tmp_path):
    (note,) = notes.operator_bumps(
        _releases_out(tmp_path, "base", "1.6.2"), _releases_out(tmp_path, "head", "1.7.0"), "dev"
    )
    assert note.startswith("KubeRay operator 1.6.2 -> 1.7.0 (Helm release kuberay-operator): the cluster stack applies")
    assert "`python -m ops local-cluster --stage dev`" in note


def test_an_image_bump_is_flagged_with_the_old_and_the_new_tag(tmp_path):
    base, head = _documents(SNAPSHOT), _documents(SNAPSHOT)
    cluster = _ray_service(head)["spec"]["rayClusterConfig"]
    for template in [cluster["headGroupSpec"]["template"], *(g["template"] for g in cluster["workerGroupSpecs"])]:
        container = template["spec"]["containers"][0]
        container["image"] = container["image"].replace("serve-llm-cuda-v1.0.0", "serve-llm-cuda-v1.0.1")
    (note,) = notes.image_bumps(_k8s_out(tmp_path, "base", "dev", base), _k8s_out(tmp_path, "head", "dev", head), "dev")
    assert note.startswith("RayService inference/ray-llm: Ray image ")
    assert ":serve-llm-cuda-v1.0.0 -> " in note and note.count(":serve-llm-cuda-v1.0.1") == 1


def test_no_image_note_without_a_new_image(tmp_path):
    same = notes.image_bumps(
        _k8s_out(tmp_path, "base", "dev", _documents(SNAPSHOT)),
        _k8s_out(tmp_path, "head", "dev", _documents(SNAPSHOT)),
        "dev",
    )
    assert same == []


def test_no_operator_note_when_the_chart_version_is_unchanged(tmp_path):
    same = notes.operator_bumps(
        _releases_out(tmp_path, "base", "1.6.2"), _releases_out(tmp_path, "head", "1.6.2"), "dev"
    )
    assert same == []


def _tree(tmp_path, name, change=None):
    """A side's tree: config/dev.yaml as committed, with `change` merged in (None: no stage file at all)."""
    (tmp_path / name / "config").mkdir(parents=True)
    if change is not None:
        write_stage(tmp_path / name / "config", merge(stage_data("dev"), change))
    return tmp_path / name


IDLE = (
    "1 of 3 GPUs stay idle (3 x g6.8xlarge; replicas at most: prefill 1 x TP 1 + decode 1 x TP 1): raise the "
    "replica counts or lower gpu_nodegroup.count"
)


def test_idle_gpus_is_the_heads_warning_with_the_bases_count(tmp_path):
    base, head = _tree(tmp_path, "base", {}), _tree(tmp_path, "head", {"gpu_nodegroup": {"count": 3}})
    assert notes.idle_gpus(base, head, "dev") == f"{IDLE} (base: 0 idle)"


def test_idle_gpus_leaves_out_a_base_count_that_did_not_change(tmp_path):
    base = _tree(tmp_path, "base", {"gpu_nodegroup": {"count": 3}, "serving": {"engine": {"max_num_seqs": 16}}})
    head = _tree(tmp_path, "head", {"gpu_nodegroup": {"count": 3}})
    assert notes.idle_gpus(base, head, "dev") == IDLE


@pytest.mark.parametrize("base_change", [None, {"gpu_nodegroup": {"count": "three"}}], ids=["no-stage", "refused"])
def test_idle_gpus_without_a_base_this_code_reads_is_the_heads_warning_alone(base_change, tmp_path):
    base, head = _tree(tmp_path, "base", base_change), _tree(tmp_path, "head", {"gpu_nodegroup": {"count": 3}})
    assert notes.idle_gpus(base, head, "dev") == IDLE


def test_no_idle_gpus_note_when_the_head_uses_every_gpu(tmp_path):
    base, head = _tree(tmp_path, "base", {"gpu_nodegroup": {"count": 3}}), _tree(tmp_path, "head", {})
    assert notes.idle_gpus(base, head, "dev") == ""


def test_a_stage_only_in_the_working_tree_is_new_with_every_resource_added(clone, diff):
    data = yaml.safe_load((clone / "config" / "dev.yaml").read_text())
    data.update(stage="qa")
    data["network"]["vpc_cidr"] = "10.9.0.0/16"
    (clone / "config" / "qa.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    run = diff(clone, "--stage", "qa")
    assert run.returncode == 0, run.stderr
    assert "stage qa (new: not in the base, every resource is added)" in run.stdout
    for stack in ("qa/Network", "qa/Cluster", "qa/Serving"):
        summary = _summary(run.stdout, stack)
        assert summary.endswith(" added, 0 changed, 0 removed, 0 replaced") and not summary.startswith("0 "), summary
    assert "+++ head/k8s/qa/inference.yaml" in run.stdout
    assert "MANUAL STEP" not in run.stdout  # nothing runs yet: nothing to roll out by hand


def test_the_larger_model_example_copied_in_diffs_as_a_new_stage_of_tp_engines(clone, diff):
    # what its header asks a user to do: copy it to config/larger-model.yaml, then review the diff
    (clone / "config" / "larger-model.yaml").write_text(LARGER_MODEL_EXAMPLE.read_text())
    run = diff(clone, "--stage", "larger-model", "--fail-on-danger")
    assert run.returncode == 0, run.stderr
    assert "stage larger-model (new: not in the base, every resource is added)" in run.stdout
    serve_config = run.stdout.split("--- Kubernetes: larger-model/serve-config.yaml", 1)[1].split("--- Kubernetes")[0]
    assert serve_config.count("+        tensor_parallel_size: 4") == 2
    assert serve_config.count("+        strategy: STRICT_PACK") == 2


def test_a_stage_in_neither_tree_is_one_line_and_exit_2(clone, diff):
    run = diff(clone, "--stage", "nosuch")
    assert run.returncode == 2
    assert run.stderr == "diff: no stage named 'nosuch' in HEAD or the working tree (stages: dev, prod)\n"


# --- local problems: one line, exit 2, before any synth -------------------------------------------------


@pytest.mark.parametrize(
    "target, message",
    [
        (
            "missing/diff.md",
            "--markdown {path}: the folder {parent} does not exist: create it, or give a path in an existing folder",
        ),
        ("folder", "--markdown {path}: is a folder: give a file path (e.g. {path}/diff.md)"),
        (
            "file.txt/diff.md",
            "--markdown {path}: {parent} is a regular file, not a folder: give a path in an existing folder",
        ),
        ("/proc/version", "--markdown {path}: cannot write it ("),
        (
            "pipe",
            "--markdown {path}: a FIFO (named pipe), not a regular file: give a file path",
        ),  # opening it would wait forever
        ("/dev/null", "--markdown {path}: a character device, not a regular file: give a file path"),
    ],
)
def test_unwritable_markdown_path_fails_before_the_synth(target, message, clone, diff, tmp_path, monkeypatch):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    path = Path(target) if target.startswith("/") else tmp_path / target
    called = []
    monkeypatch.setattr(compare, "compute", lambda *a, **k: called.append(1))
    run = diff(clone, "--markdown", str(path))
    assert run.returncode == 2 and not called and run.stdout == ""
    assert (
        run.stderr.startswith("diff: " + message.format(path=path, parent=path.parent)) and run.stderr.count("\n") == 1
    ), run.stderr


def test_git_missing_is_one_line_and_exit_2(clone, diff, tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    run = diff(clone)
    assert run.returncode == 2
    assert run.stderr == (
        "diff: git is not installed (or not on PATH): install git; diff builds the base revision in a git worktree\n"
    )


def test_outside_a_checkout_is_one_line_and_exit_2(diff, tmp_path):
    run = diff(tmp_path)
    assert run.returncode == 2
    assert run.stderr == f"diff: {tmp_path} is not inside a git checkout: run diff in a clone of the project\n"
