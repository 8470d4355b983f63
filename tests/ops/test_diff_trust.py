"""`ops diff --tree PR`: the pull request contributes data (its stage files, synthesized by the base's code);
its code runs only with --run-tree-code, in a sandbox (no HOME, credentials, variables or network of the
caller), and even then cannot hide a danger that its stage files make; its CDK CLI, git hooks and symlinks
are never followed."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
import yaml

from ops.__main__ import main
from ops.diff import trust
from ops.diff.synth import no_network

MARKER = "MARKER-7f3a"

# Prepended (after app.py's __future__ import) by the hostile pull request: it reports what it can reach, and
# reads every file as if the nodegroup's instance type were unchanged (the lie that turned a replacement into
# "no changes").
HOSTILE = """
import json as _json, os as _os, pathlib as _pathlib, socket as _socket
_creds = _pathlib.Path.home() / ".aws" / "credentials"
_seen = {{"creds": _creds.read_text() if _creds.exists() else "",
          "env": sorted(k for k, v in _os.environ.items() if "{marker}" in v)}}
try:
    _socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    _seen["net"] = True
except OSError:
    _seen["net"] = False
_pathlib.Path({leak!r}).write_text(_json.dumps(_seen))
_read = _os.read
_os.read = lambda fd, n: _read(fd, n).replace(b"m7i.2xlarge", b"m7i.xlarge")
"""


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


def _replace_the_system_nodegroup(repo):
    path = repo / "config" / "dev.yaml"
    data = yaml.safe_load(path.read_text())
    data["system_nodegroup"]["instance_type"] = "m7i.2xlarge"
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _hostile_app(repo, leak, port):
    app = repo / "app.py"
    head, future, rest = app.read_text().partition("from __future__ import annotations\n")
    app.write_text(head + future + HOSTILE.format(marker=MARKER, port=port, leak=str(leak)) + rest)


def _diff(capsys, monkeypatch, tmp_path, *args):
    monkeypatch.chdir(tmp_path)  # as in CI: the gate's code is elsewhere, the PR is only --tree
    code = main(["diff", "--base", "HEAD", "--stage", "dev", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_trees_code_does_not_run_without_run_tree_code(pull_request, tmp_path, monkeypatch, capsys, listener):
    leak = tmp_path / "leak.json"
    _replace_the_system_nodegroup(pull_request)
    _hostile_app(pull_request, leak, listener)
    code, out, err = _diff(capsys, monkeypatch, tmp_path, "--tree", str(pull_request), "--fail-on-danger")
    assert code == 1, out + err
    assert not leak.exists()  # app.py of the pull request never ran
    lines = out.splitlines()
    assert lines[1] == "DANGER: 1 destructive change(s)"
    assert lines[2].startswith("  ! dev/Cluster: nodegroup ClusterNodegroupSystemNodegroup")
    assert "NOT JUDGED: 1 part(s) of the change (--fail-on-danger fails on them)" in lines
    assert any(line.startswith("  ! code changes not synthesized (app.py)") for line in lines)


def test_a_code_change_alone_fails_the_gate_without_run_tree_code(pull_request, tmp_path, monkeypatch, capsys):
    (pull_request / "stacks" / "cluster.py").write_text("# the pull request's cluster\n", encoding="utf-8")
    code, out, _ = _diff(capsys, monkeypatch, tmp_path, "--tree", str(pull_request), "--fail-on-danger")
    assert code == 1 and "code changes not synthesized (stacks/cluster.py)" in out


def test_run_tree_code_is_sandboxed_and_cannot_hide_a_stage_file_danger(
    pull_request, tmp_path, monkeypatch, capsys, listener
):
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(f"[default]\naws_secret_access_key = {MARKER}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", MARKER)
    monkeypatch.setenv("GITHUB_TOKEN", MARKER)
    leak = tmp_path / "leak.json"
    _replace_the_system_nodegroup(pull_request)
    _hostile_app(pull_request, leak, listener)
    code, out, err = _diff(
        capsys, monkeypatch, tmp_path, "--tree", str(pull_request), "--run-tree-code", "--fail-on-danger"
    )
    assert code == 1, out + err
    seen = json.loads(leak.read_text())  # it ran, and saw nothing of the caller's
    assert seen["creds"] == "" and seen["env"] == []
    if no_network():
        assert seen["net"] is False
    lines = out.splitlines()
    assert lines[1] == "DANGER: 1 destructive change(s)"  # found by the base's code in the PR's stage files
    assert lines[2].endswith("replaced (InstanceTypes)")
    assert any(line.startswith("TRUST: working tree: synthesized by its own code (app.py)") for line in lines)


def test_the_trees_cdk_cli_never_runs(pull_request, tmp_path, monkeypatch, capsys):
    ran = tmp_path / "cdk-ran"
    (pull_request / "node_modules" / ".bin").mkdir(parents=True)
    cli = pull_request / "node_modules" / ".bin" / "cdk"
    cli.write_text(f"#!/bin/sh\ntouch {ran}\n")
    cli.chmod(0o755)
    path = pull_request / "config" / "dev.yaml"
    data = yaml.safe_load(path.read_text())
    data["system_nodegroup"]["max_size"] = 3
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = _diff(capsys, monkeypatch, tmp_path, "--tree", str(pull_request))
    assert code == 0, out + err
    assert "--- CloudFormation: dev/Cluster" in out  # the cdk diff ran: the CLI of this checkout
    assert not ran.exists()


def test_a_symlinked_stage_file_is_refused_in_one_line(pull_request, tmp_path, monkeypatch, capsys):
    secret = tmp_path / "secret.yaml"
    secret.write_text((pull_request / "config" / "dev.yaml").read_text())
    (pull_request / "config" / "dev.yaml").unlink()
    (pull_request / "config" / "dev.yaml").symlink_to(secret)
    code, out, err = _diff(capsys, monkeypatch, tmp_path, "--tree", str(pull_request))
    assert code == 2 and out == ""
    assert err == (
        f"diff: {pull_request / 'config' / 'dev.yaml'}: not a regular file (a symlink or other): the stage "
        f"files of the compared tree must be plain files\n"
    )


def test_a_symlinked_config_folder_is_refused_in_one_line(pull_request, tmp_path, monkeypatch, capsys):
    """Every file in it is regular: only the folder leads out of the tree (before: the caller's files were read)."""
    outside = tmp_path / "outside"
    (pull_request / "config").rename(outside)
    (pull_request / "config").symlink_to(outside)
    code, out, err = _diff(capsys, monkeypatch, tmp_path, "--tree", str(pull_request))
    assert code == 2 and out == ""
    assert err == (
        f"diff: {pull_request / 'config'}: not a folder of the tree (a symlink or other): config/ must be a plain "
        f"folder\n"
    )


def test_the_trees_git_hooks_never_run(pull_request, tmp_path, monkeypatch, capsys):
    ran = tmp_path / "hook-ran"
    hook = pull_request / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    code = main(["diff", "--base", "HEAD", "--stage", "nope", "--tree", str(pull_request)])
    assert code == 2 and "no stage named 'nope'" in capsys.readouterr().err
    assert not ran.exists()


def test_only_stage_files_and_inert_files_are_data():
    changed = [
        "config/dev.yaml",
        "config/_pipeline.yaml",
        "docs/DEPLOYING.md",
        "README.md",
        "tests/ops/test_x.py",
        ".github/workflows/pr.yml",
        "app.py",
        "cdk.json",
        "config/loader.py",
        "config/sub/dev.yaml",
        "config/regions.json",
        "ops/diff/danger.py",
        "package.json",
    ]
    assert trust.code_changes(changed) == [
        "app.py",
        "cdk.json",
        "config/loader.py",
        "config/sub/dev.yaml",
        "config/regions.json",
        "ops/diff/danger.py",
        "package.json",
    ]


def test_untracked_files_count_as_changes(pull_request):
    (pull_request / "stacks" / "new_stack.py").write_text("x = 1\n")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pull_request, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert trust.changed_paths(pull_request, commit) == ["stacks/new_stack.py"]
