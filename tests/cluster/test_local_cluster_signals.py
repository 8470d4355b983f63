"""`ops local-cluster` stopped by a signal at any moment, fast: the real CLI and session.run in a process of
their own, with the slow steps (build, synth, the control plane) replaced by children that behave as its
processes do (one of them with a child of its own, one that ignores SIGTERM). Whatever the signal and the
moment, no child survives, its folder (with a stand-in for the keys) is gone and the exit code is 128+N.
tests/cluster/test_local_cluster_cli.py does the same with the real control plane."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.helpers import ROOT, clean_env, kill_survivors, survivors

CHILD = r"""
import os, signal, sys, threading, time, types
from pathlib import Path
from localcluster import control_plane, deploy_order, session
from config import stage_options
from localcluster import cli as local_cluster

signum, moment, record = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def send(sig=signum):
    os.kill(os.getpid(), sig)
    time.sleep(30)  # a handler that returned: the run would go on

def setup_missing():
    if moment == "early":  # before any process: the default action would exit -15
        send()

def start(cfg, folder, box, progress):
    (folder / "pki").mkdir(parents=True)
    (folder / "pki" / "ca.key").write_text("the cluster's CA key")
    cluster = control_plane.LocalCluster(folder=folder, pki=None, endpoint="https://127.0.0.1:1", identities={})
    cluster.start("etcd", ["/bin/sh", "-c", f"sleep 300 & echo $! > {record}/grandchild.tmp && mv {record}/grandchild.tmp {record}/grandchild; wait"])
    # SIGTERM ignored: 10 s to stop, once the trap is set (before it, a loaded machine's SIGTERM ended it at once)
    cluster.start("kube-apiserver", ["/bin/sh", "-c", f"trap '' TERM; touch {record}/deaf; sleep 300"])
    while not ((record / "grandchild").exists() and (record / "deaf").exists()):
        time.sleep(0.05)
    pids = [p.popen.pid for p in cluster.processes] + [int((record / "grandchild").read_text())]
    (record / "pids").write_text(" ".join(map(str, pids)))
    (record / "folder").write_text(str(folder.parent))
    if moment == "start":  # the cluster object never reaches the code that would stop it
        send()
    return cluster

def run_steps(*args, **kwargs):
    if moment == "twice":  # a second signal while the first one's cleanup waits for the SIGTERM-deaf process
        threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGHUP)).start()
    send()

# each stand-in replaces a function that exists: a renamed one must fail here, not be patched in silently
for name in ("setup_missing", "versions_match", "toolbox", "synthesize", "start", "_run_steps"):
    assert hasattr(session, name), name
stage_options.load_stages = lambda folder, only: [types.SimpleNamespace(stage=only)]  # no stage file's rules
session.setup_missing = setup_missing
session.versions_match = lambda cfg: None
session.toolbox = lambda cfg, progress: types.SimpleNamespace(
    layer=types.SimpleNamespace(helm_version="v3", kubectl_version="v1.35")
)
session.synthesize = lambda cfg, outdir: outdir
deploy_order.steps = lambda assembly: []
session.start = start
session._run_steps = run_steps
args = types.SimpleNamespace(stage="dev", config_dir="config", json=False, keep=False)
sys.exit(local_cluster.run(args))
"""


@pytest.mark.parametrize(
    "signum, moment",
    [
        (signal.SIGTERM, "steps"),
        (signal.SIGHUP, "steps"),
        (signal.SIGQUIT, "steps"),
        (signal.SIGINT, "steps"),
        (signal.SIGTERM, "early"),
        (signal.SIGHUP, "start"),
        (signal.SIGTERM, "twice"),
    ],
)
def test_a_signal_at_any_moment_ends_every_child_and_removes_the_folder(tmp_path, signum, moment):
    record, scratch = tmp_path / "record", tmp_path / "tmp"
    record.mkdir()
    scratch.mkdir()
    env = clean_env(TMPDIR=str(scratch))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(int(signum)), moment, str(record)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    pids = [int(p) for p in (record / "pids").read_text().split()] if (record / "pids").exists() else []
    try:
        assert run.returncode == 128 + signum, run.stderr[-3000:]
        assert run.stderr.strip().splitlines()[-1] == (
            f"local-cluster --stage dev: stopped by {signal.Signals(signum).name}; every process it started "
            "is ended, its folder removed"
        )
        assert list(scratch.iterdir()) == []  # the cluster's folder, the key in it, the scratch folder
        assert (moment == "early") == (pids == [])
        assert survivors(pids, within=5) == []
    finally:
        kill_survivors(pids)


SHORT_LIVED = r"""
import os, signal, sys, threading, time
from pathlib import Path
from localcluster import helm, tools
from clients.signals import EVERY, Terminated, terminating

which, record = sys.argv[1], Path(sys.argv[2])
fake = record / "bin"
fake.mkdir()
program = fake / which
program.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {record}/pids.tmp\nmv {record}/pids.tmp {record}/pids\nwait\n")
program.chmod(0o755)

def signal_once_started():
    while not (record / "pids").exists():
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=signal_once_started, daemon=True).start()
try:
    with terminating(signals=EVERY):
        if which == "go":
            os.environ["PATH"] = f"{fake}:{os.environ['PATH']}"
            tools.go_command(["build"], folder=record, caches=tools.GoCaches(record, record, record))
        else:
            helm.uninstall(program, helm.Release("r", "c", "1", "ns", {}), record / "kubeconfig", record / "helm")
except Terminated as exc:
    sys.exit(exc.exit_code)
"""


@pytest.mark.parametrize("which", ["go", "helm"])
def test_a_signal_during_a_build_or_a_helm_run_ends_the_program_and_what_it_started(tmp_path, which):
    # go build runs compile and link; a Helm plugin or post-renderer is a program of its own: the stand-in
    # here starts a child and waits for it, as they do.
    run = subprocess.run(
        [sys.executable, "-c", SHORT_LIVED, which, str(tmp_path)],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        assert run.returncode == 143, run.stderr[-3000:]
        assert survivors(pids, within=5) == []
    finally:
        kill_survivors(pids)


def test_the_printed_stop_command_ends_a_kept_clusters_groups_and_removes_its_folder(tmp_path):
    """--keep prints stop_command: it must end each recorded process with its whole group, at once, even one
    that ignores SIGTERM (as kube-apiserver's graceful shutdown outlived `kill PIDS`), and remove the folder."""
    from localcluster.cli import stop_command

    folder = tmp_path / "kept"
    folder.mkdir()
    stubborn = "trap '' TERM; sleep 300 & wait"
    leaders = [subprocess.Popen(["bash", "-c", stubborn], start_new_session=True) for _ in range(2)]
    (folder / "pids").write_text(" ".join(str(p.pid) for p in leaders) + "\n")
    subprocess.run(["bash", "-c", stop_command(folder)], check=True, timeout=30)
    assert [p.wait(timeout=10) for p in leaders] == [-9, -9]
    assert not folder.exists()


def test_the_pids_file_is_replaced_whole_never_truncated_in_place(tmp_path):
    """A reader of the pids file (the stop command, the signal test) must never find it empty mid-write: the
    control plane writes it aside and renames it, so a reader holding the old file still reads it whole."""
    from localcluster.control_plane import _write_pids

    _write_pids(tmp_path, [11, 12])
    with (tmp_path / "pids").open() as before:
        _write_pids(tmp_path, [11, 12, 13])
        assert before.read() == "11 12\n"
    assert (tmp_path / "pids").read_text() == "11 12 13\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pids"]
