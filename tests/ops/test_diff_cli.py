"""`ops diff` as a command: stopped by SIGTERM (a cancelled CI job) it removes its temporary folder and ends its
children; without cfn-lint (the main job's venv) it says what to run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT, clean_env


def test_sigterm_mid_synth_removes_the_temporary_folder_and_exits_143(tmp_path):
    env = clean_env(TMPDIR=str(tmp_path))
    env["PATH"] = os.environ["PATH"]
    process = subprocess.Popen(
        [sys.executable, "-m", "ops", "diff", "--base", "HEAD", "--stage", "dev"],
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
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "diff: stopped by SIGTERM; its temporary folder is removed"
    assert list(tmp_path.glob("pd-diff-*")) == []
    leftover = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    assert str(tmp_path) not in leftover.stdout


def test_without_cfn_lint_diff_says_what_to_run_and_exits_2(monkeypatch, capsys):
    from ops.__main__ import main

    monkeypatch.setitem(sys.modules, "cfnlint", None)  # what the main job's venv (requirements.txt) lacks
    assert main(["diff", "--base", "HEAD"]) == 2
    assert capsys.readouterr().err == (
        "diff: cfn-lint is not installed in this venv (ops diff reads CloudFormation's "
        "resource schemas from it): run scripts/setup.sh --dev, then ops diff again\n"
    )
