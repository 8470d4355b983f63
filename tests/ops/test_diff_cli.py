"""`ops diff` as a command: stopped by SIGTERM (a cancelled CI job) it removes its temporary folder and ends its
children; without cfn-lint (the main job's venv) it says what to run; --json prints the report as data."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

import pytest

from ops.__main__ import main
from ops.diff import DiffResult, ResourceChange, StackDiff, StageDiff, compare, processes
from tests.helpers import ROOT, clean_env

CFN_LINT_MISSING = (
    "diff: cfn-lint is not installed in this venv (ops diff reads CloudFormation's "
    "resource schemas from it): run scripts/setup.sh, then ops diff again\n"
)


def _ours(tmp_path) -> list[str]:
    """Processes still running with the test's TMPDIR (or a folder in it) in their environment."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if str(tmp_path).encode() in environ.read_bytes():
                found.append(environ.parent.name)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_mid_synth_ends_the_children_leaves_nothing_and_exits_128_plus_n(tmp_path, sig):
    env = clean_env(TMPDIR=str(tmp_path))
    env["PATH"] = os.environ["PATH"]
    # a synth must run: kept output (ops/diff/synth_cache.py) would copy both sides of this unchanged tree
    process = subprocess.Popen(
        [sys.executable, "-m", "ops", "diff", "--base", "HEAD", "--stage", "dev", "--no-synth-cache"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    # wait until a synth writes into the temporary folder (its assembly appears)
    while time.monotonic() < deadline and not list(tmp_path.glob("pd-diff-*/*.out")):
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    assert list(tmp_path.glob("pd-diff-*")), "diff never made its temporary folder"
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + sig, stderr
    assert stderr.strip().splitlines()[-1] == f"diff: stopped by {sig.name}; its temporary folder is removed"
    assert list(tmp_path.iterdir()) == []  # jsii's temporary files too (each synth's TMPDIR is in the folder)
    assert _ours(tmp_path) == []  # no synth, node or git child outlives it
    leftover = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert str(tmp_path) not in leftover.stdout


# `ops diff` in a process of its own (a signal to pytest's process would end the test run), its first Ctrl-C
# sent once the base is checked out. {cleanup} runs as the cleanup starts.
CTRL_C = r"""
import os, signal, sys
from ops.diff import compare
from ops.__main__ import main
real_add, real_remove = compare.worktree.add, compare.worktree.remove
def add(repo, ref, where):
    commit = real_add(repo, ref, where)
    os.kill(os.getpid(), signal.SIGINT)
    return commit
def remove(repo, where):
    {cleanup}
    real_remove(repo, where)
compare.worktree.add, compare.worktree.remove = add, remove
sys.exit(main(["diff", "--base", "HEAD", "--stage", "dev", "--no-synth-cache"]))
"""


def _stopped(tmp_path, cleanup: str) -> subprocess.CompletedProcess:
    env = clean_env(TMPDIR=str(tmp_path))
    code = CTRL_C.replace("{cleanup}", cleanup)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_second_ctrl_c_during_the_cleanup_does_not_cut_it_short(tmp_path):
    run = _stopped(tmp_path, "os.kill(os.getpid(), signal.SIGINT)  # the impatient second Ctrl-C")
    assert run.returncode == 130, run.stderr
    assert run.stderr.splitlines()[-1] == "diff: stopped by SIGINT; its temporary folder is removed"
    assert list(tmp_path.iterdir()) == []


def test_a_folder_the_stopped_diff_could_not_remove_is_named_not_called_removed(tmp_path):
    run = _stopped(tmp_path, "compare.shutil.rmtree = lambda *a, **k: None  # the removal fails")
    (left,) = tmp_path.glob("pd-diff-*")
    assert run.returncode == 130, run.stderr
    assert run.stderr.splitlines()[-1] == (
        f"diff: stopped by SIGINT; its temporary folder {left} could not be removed: remove it by hand"
    )


def test_each_synth_is_announced_on_stderr_as_it_starts(clone, monkeypatch, capsys):
    monkeypatch.setattr(compare, "synth", lambda tree, out, *args: out.mkdir())
    monkeypatch.chdir(clone)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True).stdout
    assert main(["diff", "--base", "HEAD", "--no-synth-cache"]) == 0
    assert sorted(capsys.readouterr().err.splitlines()) == [
        f"diff: synthesizing the base at HEAD ({commit[:10]})",
        "diff: synthesizing the working tree's stage files on the base's code",
    ]


def test_a_child_started_just_as_the_diff_stops_is_ended_too(monkeypatch):
    """Popen returns, and before the thread registers the child, end_children runs: it must still end it."""
    real_popen, popened = subprocess.Popen, threading.Event()

    def popen_then_stall(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        popened.set()
        processes._stopping.wait(10)  # end_children has begun: the thread is descheduled here, as under load
        time.sleep(0.3)
        return process

    monkeypatch.setattr(processes.subprocess, "Popen", popen_then_stall)
    processes.start()
    runner = threading.Thread(target=lambda: processes.child(["sleep", "300"], timeout=30), daemon=True)
    runner.start()
    assert popened.wait(10)
    processes.end_children(grace=1.0)
    runner.join(timeout=10)
    processes.start()
    assert not runner.is_alive()


def test_ending_the_children_asks_first_then_kills_their_whole_group(tmp_path):
    asked, orphan = tmp_path / "asked", tmp_path / "orphan.pid"
    # the child writes `asked` on SIGTERM (then hangs on), and leaves a grandchild in its group
    script = f"trap 'touch {asked}' TERM; sleep 300 & echo $! > {orphan}; while :; do sleep 0.1; done"
    runner = threading.Thread(target=lambda: processes.child(["sh", "-c", script], timeout=60), daemon=True)
    processes.start()
    runner.start()
    deadline = time.monotonic() + 30
    while not orphan.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    processes.end_children(grace=1.0)
    runner.join(timeout=10)
    processes.start()
    assert asked.exists()  # SIGTERM first: a child can clean up
    assert time.monotonic() - started < 5  # then SIGKILL after the grace
    assert not runner.is_alive()
    grandchild = int(orphan.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]


def test_without_cfn_lint_diff_says_what_to_run_and_exits_2(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cfnlint", None)  # a venv made before requirements.txt pinned it
    assert main(["diff", "--base", "HEAD"]) == 2
    assert capsys.readouterr().err == CFN_LINT_MISSING


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: str) -> set[str]:
    """The distributions a requirements file names, its -r includes too (canonical names, no extras)."""
    found = set()
    for line in (ROOT / requirements).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found |= _names(line.split(None, 1)[1])
        elif line:
            found.add(_canonical(re.split(r"[\[=<>~! ]", line, maxsplit=1)[0]))
    return found


def _installed_with(names: set[str]) -> set[str]:
    """`names` and every distribution they require, as installed here (what their venv holds)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_canonical(re.split(r"[\[=<>~!; (]", r, maxsplit=1)[0]) for r in requires if "extra ==" not in r]
    return seen


def test_after_the_main_job_alone_diff_runs():
    """scripts/synth.sh installs requirements.txt only: `ops diff` needs none of the test set-up's own packages
    (moto, ray, ...): with them blocked it passes its cfn-lint check and goes on to resolve the base."""
    main_job = _installed_with(_names("requirements.txt"))
    dev_only = _installed_with(_names("requirements-dev.txt")) - main_job
    blocked = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if {_canonical(d) for d in dists} & dev_only and not {_canonical(d) for d in dists} & main_job
    )
    assert "moto" in blocked and "cfnlint" not in blocked, blocked
    probe = (
        "import runpy, sys\n"
        f"BLOCKED = {blocked!r}\n"
        "class Blocked:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Blocked())\n"
        "sys.argv = ['ops', 'diff', '--base', 'no-such-ref-of-this-test']\n"
        "runpy.run_module('ops', run_name='__main__', alter_sys=True)\n"
    )
    env = clean_env(JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")  # as scripts/env.sh: Node 20's banner
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    message = "diff: 'no-such-ref-of-this-test' is not a commit in this repository\n"
    assert (run.returncode, run.stdout, run.stderr) == (2, "", message)


def _result() -> DiffResult:
    changes = [
        ResourceChange("Nodes", "AWS::EKS::Nodegroup", "replaced", ["InstanceTypes"]),
        ResourceChange("Role", "AWS::IAM::Role", "changed"),
    ]
    stack = StackDiff("dev", "dev/Cluster", changes, cfn_diff="[~] AWS::EKS::Nodegroup Nodes")
    stage = StageDiff(
        "dev", [stack], {"inference.yaml": "--- a\n+++ b\n"}, manual=["step"], idle_gpus="1 of 3", notes=["note"]
    )
    return DiffResult(base="HEAD (0123456789)", stages=[stage, StageDiff("qa", [], {}, status="new")])


def test_json_is_the_report_as_data_with_the_same_exit_code(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(compare, "compute", lambda base, **kwargs: _result())
    markdown = tmp_path / "diff.md"
    assert main(["diff", "--base", "HEAD", "--json", "--fail-on-danger", "--markdown", str(markdown)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["command"] == "diff" and report["base"] == "HEAD (0123456789)" and report["dangerous"] is True
    assert report["dangers"] == [
        {
            "stack": "dev/Cluster",
            "logical_id": "Nodes",
            "type": "AWS::EKS::Nodegroup",
            "action": "replaced",
            "because": ["InstanceTypes"],
            "dangerous": True,
            "text": "nodegroup Nodes replaced (InstanceTypes)",
        }
    ]
    assert report["manual_steps"] == [{"stage": "dev", "text": "step"}]
    assert report["idle_gpus"] == [{"stage": "dev", "text": "1 of 3"}]
    assert report["notes"] == [{"stage": "dev", "text": "note"}]
    dev, qa = report["stages"]
    assert (dev["status"], qa["status"]) == ("both", "new")
    (stack,) = dev["stacks"]
    assert {key: stack[key] for key in ("path", "added", "changed", "removed", "replaced")} == {
        "path": "dev/Cluster",
        "added": 0,
        "changed": 1,
        "removed": 0,
        "replaced": 1,
    }
    assert stack["cloudformation_diff"] == "[~] AWS::EKS::Nodegroup Nodes"
    assert dev["kubernetes_diffs"] == {"inference.yaml": "--- a\n+++ b\n"}
    assert "| dev | `dev/Cluster` | 0 | 1 | 0 | 1 |" in markdown.read_text()  # --markdown is still written
    assert main(["diff", "--base", "HEAD", "--json"]) == 0  # without --fail-on-danger: done
