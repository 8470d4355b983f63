"""`python -m ops diff --base REF --tree PATH`: the diff code that runs judges the working tree of another
checkout. CI runs the base branch's `ops diff` this way with the pull request's checkout as PATH, so a pull
request that edits ops/diff/ cannot switch off the danger gate that judges it."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from ops import diff as diff_module
from ops.__main__ import main
from ops.diff import compare, synth_cache

# What a pull request could append to its own ops/diff/ (the package, ops/diff.py before it was one) to pass
# the gate with any change.
DISABLE_THE_GATE = "\n\nResourceChange.dangerous = property(lambda self: False)  # the PR switches its gate off\n"


def test_tree_is_the_checkout_that_is_compared_wherever_diff_runs(tmp_path, monkeypatch, capsys, session_synth_cache):
    seen = {}

    def compute(base, progress, **kwargs):
        seen.update(base=base, **kwargs)
        return diff_module.DiffResult(base=base, stages=[])

    monkeypatch.setattr(compare, "compute", compute)
    monkeypatch.chdir(tmp_path)  # not a checkout: only --tree names one
    (tmp_path / "checkout").mkdir()
    assert main(["diff", "--base", "abc123", "--tree", str(tmp_path / "checkout")]) == 0
    assert seen == {
        "base": "abc123",
        "stage": None,
        "start": tmp_path / "checkout",
        "run_tree_code": False,
        "cache": synth_cache.SynthCache(session_synth_cache),
    }
    capsys.readouterr()
    assert main(["diff", "--base", "abc123"]) == 0
    assert seen["start"] is None  # without --tree: the checkout around the current folder, as before


def test_a_tree_that_is_no_folder_is_one_line_and_exit_2_before_any_synth(tmp_path, monkeypatch, capsys):
    called = []
    monkeypatch.setattr(compare, "compute", lambda *a, **k: called.append(1))
    missing = tmp_path / "nope"
    assert main(["diff", "--base", "HEAD", "--tree", str(missing)]) == 2
    captured = capsys.readouterr()
    assert not called and captured.out == ""
    assert captured.err == f"diff: --tree {missing}: no such folder: give the path of a git checkout\n"


def test_a_pull_request_that_disables_its_own_gate_is_still_judged_by_the_running_code(
    pull_request, tmp_path, monkeypatch, capsys
):
    # the pull request: a destructive change (the system nodegroup is replaced) and a disabled gate
    path = pull_request / "config" / "dev.yaml"
    data = yaml.safe_load(path.read_text())
    data["system_nodegroup"]["instance_type"] = "m7i.2xlarge"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    package = pull_request / "ops" / "diff"
    with (package / "__init__.py" if package.is_dir() else pull_request / "ops" / "diff.py").open("a") as handle:
        handle.write(DISABLE_THE_GATE)
    own = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ops.diff import ResourceChange as R; print(R('x', 'AWS::EKS::Nodegroup', 'replaced').dangerous)",
        ],
        cwd=pull_request,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert own.stdout.strip() == "False", own.stderr  # its own gate would let anything through

    monkeypatch.chdir(tmp_path)  # as in CI: the gate's code is elsewhere, the PR is only --tree
    code = main(["diff", "--base", "HEAD", "--stage", "dev", "--tree", str(pull_request), "--fail-on-danger"])
    out = capsys.readouterr().out.splitlines()
    assert code == 1, out
    assert out[1] == "DANGER: 1 destructive change(s)"
    assert out[2].startswith("  ! dev/Cluster: nodegroup ClusterNodegroupSystemNodegroup")
    assert out[2].endswith("replaced (InstanceTypes)")


def test_a_tree_that_is_a_file_is_named_a_file_not_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(compare, "compute", lambda *a, **k: pytest.fail("compared"))
    (tmp_path / "file").write_text("x")
    assert main(["diff", "--base", "HEAD", "--tree", str(tmp_path / "file")]) == 2
    assert capsys.readouterr().err.endswith(": a regular file, not a folder: give the path of a git checkout\n")
