"""`python -m ops local-cluster` as an operator runs it: its own set-up named in one line, exit 0 with the
real operator's verdict on a good stage, 1 when a check fails, and SIGTERM / SIGHUP / SIGQUIT ending every
process it started and removing its folder (keys, tokens, etcd data), exit 143 / 129 / 131 as Ctrl-C's 130
(tests/ops/test_local_cluster_signals.py: the same at every moment of a run, with stand-in processes)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clients.report import Report
from localcluster import cli as local_cluster
from localcluster import session
from tests.helpers import ROOT, clean_env, pid_alive, survivors

COMMAND = [sys.executable, "-m", "ops", "local-cluster", "--stage", "dev"]


def test_without_its_set_up_it_names_the_command_to_run(tmp_path):
    # An empty user cache: no built program is found (Go's own caches are not touched).
    env = clean_env(XDG_CACHE_HOME=str(tmp_path / "empty-cache"))
    run = subprocess.run(COMMAND, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("local-cluster --stage dev: its set-up is missing (the local cluster's etcd, ")
    assert line.endswith("(not built or downloaded yet)): run scripts/setup.sh --cluster")


def test_a_good_stage_exits_0_with_the_operators_verdict(box):
    run = subprocess.run(COMMAND, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    verdict = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"the KubeRay operator's verdict: pass: RayService ray-llm Ready: RayCluster ray-llm-\w+, .*", verdict
    )
    assert "b'" not in run.stderr  # no jsii banner read as bytes


def _namespace(**kwargs):
    defaults = {"stage": "dev", "config_dir": "config", "json": False, "keep": False}
    return type("Args", (), {**defaults, **kwargs})()


def test_a_failed_check_exits_1(monkeypatch, capsys):
    report = Report("local-cluster", "dev")
    report.add("KubeRay operator", "fail", "RayService inference/ray-llm Ready within 120 s")
    report.extra["versions"] = {}
    monkeypatch.setattr(session, "setup_missing", lambda: None)
    monkeypatch.setattr(session, "run", lambda cfg, keep, progress: report)
    assert local_cluster.run(_namespace()) == 1
    assert capsys.readouterr().out.strip().endswith("verdict: fail: RayService inference/ray-llm Ready within 120 s")


def _started(process: subprocess.Popen, lines: list[str], tmp: Path) -> Path:
    """The cluster's folder under `tmp` (the run's TMPDIR), once kwok has started (the control plane runs)."""
    deadline = time.monotonic() + 300
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)
        if "starting kwok" in line:
            break
        assert time.monotonic() < deadline, "".join(lines)
    (pids,) = tmp.glob("local-cluster-dev-*/cluster/pids")
    return pids.parent


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_a_signal_ends_every_process_and_removes_the_folder(box, signum, code, tmp_path):
    # A TMPDIR of its own: the cluster's folder is this run's, whatever else runs on the machine
    env = clean_env(TMPDIR=str(tmp_path))
    process = subprocess.Popen(COMMAND, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        folder = _started(process, lines, tmp_path)
        pids = [int(p) for p in (folder / "pids").read_text().split()]
        assert pids and all(pid_alive(pid) for pid in pids)
        process.send_signal(signum)
        _, rest = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == code, "".join(lines) + rest
    assert "every process it started is ended, its folder removed" in rest
    assert not folder.parent.exists()
    assert survivors(pids, within=20) == []
