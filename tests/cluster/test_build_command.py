"""python -m localcluster build (localcluster/__main__.py), as scripts/setup.sh runs it beside its other installs:
a signal ends the go command it runs, with what that started, and exits 128 + the signal in one line."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT, clean_env, kill_survivors, survivors

# A stand-in for go: `go env` answers with folders under the test's; any other command starts a child (as go
# build starts compile and link), records both pids and waits.
FAKE_GO = """#!/bin/sh
if [ "$1" = env ]; then echo "$RECORD/gomod"; echo "$RECORD/gobuild"; exit 0; fi
sleep 300 &
echo $$ $! > "$RECORD/pids.tmp"
mv "$RECORD/pids.tmp" "$RECORD/pids"
wait
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_build_ends_go_and_what_it_started(tmp_path, signum):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "go").write_text(FAKE_GO)
    (tmp_path / "bin" / "go").chmod(0o755)
    env = {**clean_env(), "RECORD": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    build = subprocess.Popen(
        [sys.executable, "-m", "localcluster", "build"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "pids").exists() and build.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    try:
        build.send_signal(signum)
        _, stderr = build.communicate(timeout=60)
        assert build.returncode == 128 + signum, stderr
        assert stderr.strip().splitlines() == [
            f"setup: the Go build stopped by {signal.Signals(signum).name}; the go command it ran is ended"
        ]
        assert survivors(pids, within=5) == []
    finally:
        kill_survivors(pids)
