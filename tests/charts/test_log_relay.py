"""The worker pods' log relay, run for real on files as Ray writes them: what it forwards gives the same
NIXL verdict (ops/nixl.py) and the same alarm matches (stacks/log_patterns.py) as the whole logs, for
`ops verify`'s fixtures and for the real lines of the H200 rehearsal; it follows files that appear
later, lines written in pieces, and a file that starts over."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from charts.log_relay import CONTAINER, RAY_TMP, RELAY_PROGRAM, VOLUME, relay_container
from ops import nixl
from stacks.log_patterns import NIXL_NOT_ON_EFA, matches

from ..helpers import ROOT

FIXTURES = sorted((ROOT / "tests" / "ops" / "fixtures").glob("*.log"))
REAL_LINES = ROOT / "docs" / "rehearsal" / "2026-11-30-h200-pd" / "nixl-lines-pd.txt"


class Relay:
    """The relay program as the pod runs it (python3 -B -u -c), on a folder of ours."""

    def __init__(self, logs: Path) -> None:
        env = {**os.environ, "RELAY_LOGS": str(logs), "RELAY_POLL_SECONDS": "0.05"}
        self.proc = subprocess.Popen([sys.executable, "-B", "-u", "-c", RELAY_PROGRAM], env=env,
                                     stdout=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def read_until(self, done, timeout: float = 15.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done(list(self.lines)):
                return list(self.lines)
            time.sleep(0.05)
        raise AssertionError(f"relay output so far: {self.lines}")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def relay(tmp_path):
    started = []

    def start() -> Relay:
        started.append(Relay(tmp_path))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def _by_file(lines: list[str]) -> dict[str, list[str]]:
    grouped = defaultdict(list)
    for line in lines:
        name, _, text = line.partition("] ")
        grouped[name.lstrip("[")].append(text)
    return grouped


def _logs() -> dict[str, str]:
    """worker file name -> its text: each fixture, and each worker of the real rehearsal."""
    logs = {f"worker-fixture-{path.stem}.err": path.read_text() for path in FIXTURES}
    real = defaultdict(list)
    for line in REAL_LINES.read_text().splitlines():
        name, _, text = line.partition(": ")
        real[name].append(text)
    logs.update({name: "\n".join(lines) + "\n" for name, lines in real.items()})
    return logs


def test_what_is_relayed_classifies_and_alarms_like_the_whole_log(tmp_path, relay):
    logs = _logs()
    for name, text in logs.items():
        (tmp_path / name).write_text(text)
    wanted = {name: [l for l in text.splitlines() if nixl.classify(l).verdict != "no-nixl" or " ERROR " in " " + l]
              for name, text in logs.items()}
    out = _by_file(relay().read_until(lambda lines: len(lines) >= sum(map(len, wanted.values()))))
    assert set(out) <= set(logs)
    for name, text in logs.items():
        relayed = "\n".join(out.get(name, []))
        assert nixl.classify(relayed).verdict == nixl.classify(text).verdict, name
        for pattern in NIXL_NOT_ON_EFA.values():
            assert any(matches(pattern, l) for l in out.get(name, [])) == \
                any(matches(pattern, l) for l in text.splitlines()), (name, pattern)
    # and it is a filter: the real workers' logs had many more lines than it forwards
    assert sum(map(len, out.values())) < sum(len(t.splitlines()) for t in logs.values())


def test_the_verdicts_cover_efa_tcp_and_ucx():
    # The test above would prove little if every log classified the same.
    verdicts = {nixl.classify(text).verdict for text in _logs().values()}
    assert {"efa", "tcp", "ucx"} <= verdicts


def test_files_that_appear_later_lines_written_in_pieces_and_a_file_that_starts_over(tmp_path, relay):
    running = relay()
    first = tmp_path / "worker-a.err"
    first.write_text("INFO noise\nNIXL INFO Created 2 rails using provid")
    time.sleep(0.3)
    with first.open("a") as log:
        log.write("er=efa\n")
    running.read_until(lambda lines: lines == ["[worker-a.err] NIXL INFO Created 2 rails using provider=efa"])
    (tmp_path / "worker-b.out").write_text("Backend UCX was instantiated\n")
    running.read_until(lambda lines: "[worker-b.out] Backend UCX was instantiated" in lines)
    first.write_text("ERROR 11-30 boom\n")  # shorter than what was read: a new file under the same name
    running.read_until(lambda lines: "[worker-a.err] ERROR 11-30 boom" in lines)
    (tmp_path / "raylet.out").write_text("Backend UCX was instantiated\n")  # not a worker's log
    time.sleep(0.5)
    assert not any(line.startswith("[raylet") for line in running.read_until(lambda lines: True))


def test_the_container_reads_a_read_only_ray_tmp_with_no_privileges():
    container = relay_container("image:tag")
    assert container["name"] == CONTAINER and container["image"] == "image:tag"
    assert container["command"][:4] == ["python3", "-B", "-u", "-c"] and container["command"][4] == RELAY_PROGRAM
    assert container["volumeMounts"] == [{"name": VOLUME, "mountPath": RAY_TMP, "readOnly": True}]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
