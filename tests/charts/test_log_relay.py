"""The worker pods' log relay, run for real on files as Ray writes them: what it forwards gives the same
NIXL verdict (clients/nixl.py) and the same alarm matches (stacks/log_patterns.py) as the whole logs, for
`ops verify`'s fixtures and for the real lines of the H200 rehearsal; it follows files that appear
later, lines written in pieces, and a file that starts over. It reads in bounded chunks (a 300 MB log
within the container's 128Mi), starts at the end of the files already there (a restart forwards no line
twice), follows a rotated file by its inode, and cuts an over-long line."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import pytest

from charts.log_relay import CONTAINER, RAY_TMP, RELAY_PROGRAM, VOLUME
from charts.ray_pods import plain_container, relay_container
from clients import nixl
from stacks.log_patterns import NIXL_NOT_ON_EFA, NON_EFA_PROVIDER, matches

from ..helpers import ROOT

FIXTURES = sorted((ROOT / "tests" / "ops" / "fixtures").glob("*.log"))
REAL_LINES = ROOT / "evidence" / "2026-11-30-h200-pd" / "nixl-lines-pd.txt"
MEMORY_LIMIT = 128 * 2**20  # the container's memory limit (relay_container)
SYNC = "worker-zz-sync.err"  # a log of the tests' own, to know that the relay has made its first pass
CUT = " [... cut by the log relay]"


class Relay:
    """The relay program as the pod runs it (python3 -B -u -c), on a folder of ours. Made, it has passed
    over that folder at least once: the files there it follows from their end, those that appear later
    from their start. (The lines of the sync log, which shows that, are left out of `lines`.)"""

    def __init__(self, logs: Path, *, poll: float = 0.05, address_space: int | None = None) -> None:
        env = {**os.environ, "RELAY_LOGS": str(logs), "RELAY_POLL_SECONDS": str(poll)}

        def limit() -> None:
            if address_space is not None:
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        self.sync = logs / SYNC
        self.sync.touch()
        self.proc = subprocess.Popen(
            [sys.executable, "-B", "-u", "-c", RELAY_PROGRAM],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # setrlimit alone runs in the child (no import, no lock to inherit): 3.11's Popen has no other way to
            # cap the address space before the interpreter starts.
            preexec_fn=limit,  # noqa: PLW1509
        )
        self.lines: list[str] = []
        self.synced = 0
        threading.Thread(target=self._read, daemon=True).start()
        self._sync_round()  # a line added to the sync log came out: its first pass is over

    def _read(self) -> None:
        assert self.proc.stdout is not None  # stdout=PIPE
        for line in self.proc.stdout:
            if line.startswith(f"[{SYNC}] "):
                self.synced += 1
            else:
                self.lines.append(line.rstrip("\n"))

    def _alive(self) -> None:
        if self.proc.poll() is not None:
            assert self.proc.stderr is not None  # stderr=PIPE
            raise AssertionError(f"the relay exited ({self.proc.returncode}): {self.proc.stderr.read()[-3000:]}")

    def _sync_round(self, timeout: float = 60.0) -> None:
        before, deadline = self.synced, time.monotonic() + timeout
        while self.synced == before:
            self._alive()
            assert time.monotonic() < deadline, "the relay forwarded no line of the sync log"
            with self.sync.open("a") as log:
                log.write("INFO relay-sync ERROR \n")
            time.sleep(0.2)

    def read_until(self, done, timeout: float = 15.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done(list(self.lines)):
                return list(self.lines)
            self._alive()
            time.sleep(0.05)
        raise AssertionError(f"relay output so far: {self.lines[-20:]}")

    def settled(self) -> list[str]:
        """Its lines once it has made a whole pass after what was written before (so nothing more comes
        of it): the sync log sorts last, and a line of it comes out in a later pass than the one before."""
        for _ in range(3):
            self._sync_round()
        return list(self.lines)

    @contextmanager
    def paused(self):
        """SIGSTOP until the block ends: what is done meanwhile, it finds all at once."""
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)

    def peak_rss(self) -> int:
        """VmHWM: the most resident memory the relay has had, in bytes."""
        for row in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def relay(tmp_path):
    started = []

    def start(**options) -> Relay:
        started.append(Relay(tmp_path, **options))
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
    running = relay()  # before the files: those already there at its start it follows from their end
    for name, text in logs.items():
        (tmp_path / name).write_text(text)
    wanted = {
        name: [l for l in text.splitlines() if nixl.classify(l).verdict != "no-nixl" or " ERROR " in " " + l]
        for name, text in logs.items()
    }
    out = _by_file(running.read_until(lambda lines: len(lines) >= sum(map(len, wanted.values()))))
    assert set(out) <= set(logs)
    for name, text in logs.items():
        relayed = "\n".join(out.get(name, []))
        assert nixl.classify(relayed).verdict == nixl.classify(text).verdict, name
        for pattern in NIXL_NOT_ON_EFA.values():
            assert any(matches(pattern, l) for l in out.get(name, [])) == any(
                matches(pattern, l) for l in text.splitlines()
            ), (name, pattern)
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
    container = plain_container(relay_container("image:tag"))
    assert container["name"] == CONTAINER and container["image"] == "image:tag"
    assert container["command"][:4] == ["python3", "-B", "-u", "-c"] and container["command"][4] == RELAY_PROGRAM
    assert container["volumeMounts"] == [{"name": VOLUME, "mountPath": RAY_TMP, "readOnly": True}]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _noise_block(index: int, size: int = 2**20) -> bytes:
    """About `size` bytes of a worker's ordinary lines, with one ERROR line (numbered `index`) amid them."""
    noise = b"INFO 11-30 12:00:00 [model_runner.py:1234] step done: 128 tokens in 5.2 ms, kv cache 41.7%\n"
    half = noise * (size // len(noise) // 2)
    return half + b"(RayWorkerWrapper pid=7027) ERROR 11-30 12:00:01 engine step %d failed\n" % index + half


def test_a_300_mb_log_stays_within_the_containers_memory_and_only_new_lines_come_out(tmp_path, relay):
    # The log as a restarted relay finds it: 300 MB already there (a hole: no disk), old NIXL lines in it.
    big = tmp_path / "worker-big.err"
    with big.open("wb") as log:
        log.write(b"NIXL INFO Created 2 rails using provider=tcp\n(pid=7027) ERROR 11-30 old\n")
        log.truncate(300 * 2**20)
        log.seek(0, os.SEEK_END)
        log.write(b"\nNIXL INFO Backend UCX was instantiated\n")
    try:
        # CPython itself needs about 13 MiB of address space; the relay gets the container's 128 MiB.
        running = relay(address_space=MEMORY_LIMIT)
        blocks = 300  # and 300 MB more while it runs, read as it comes
        with big.open("ab") as log:
            for index in range(blocks):
                log.write(_noise_block(index))
            log.write(b"NIXL INFO Created 2 rails using provider=efa\n")
        done = "[worker-big.err] NIXL INFO Created 2 rails using provider=efa"
        running.read_until(lambda lines: done in lines, timeout=300)
        out = running.settled()
        assert out == [
            f"[worker-big.err] (RayWorkerWrapper pid=7027) ERROR 11-30 12:00:01 engine step {index} failed"
            for index in range(blocks)
        ] + [done]
        assert big.stat().st_size > 600 * 10**6
        peak = running.peak_rss()
        print(f"relay peak RSS (VmHWM) over {big.stat().st_size / 2**20:.0f} MiB: {peak / 2**20:.1f} MiB")
        assert peak < MEMORY_LIMIT / 4  # bounded reads: far below the limit, not just under it
    finally:
        big.unlink()


def test_a_restart_forwards_no_line_a_second_time(tmp_path, relay):
    log = tmp_path / "worker-a.err"
    first = relay()
    log.write_text("NIXL INFO Created 2 rails using provider=tcp\nINFO noise\n(pid=1) ERROR 11-30 one\n")
    wanted = ["[worker-a.err] NIXL INFO Created 2 rails using provider=tcp", "[worker-a.err] (pid=1) ERROR 11-30 one"]
    first.read_until(lambda lines: lines == wanted)
    first.stop()  # the container restarts: a new process, nothing kept
    with log.open("a") as out:
        # while no relay runs: not forwarded (the price of having no offset file), nor a line begun then
        out.write("(pid=1) ERROR 11-30 while it was down\n(pid=1) ERROR 11-30 begun")
    second = relay()
    with log.open("a") as out:
        out.write(" before the start, ended after\n(pid=1) ERROR 11-30 two\n")
    assert second.read_until(lambda lines: lines) == ["[worker-a.err] (pid=1) ERROR 11-30 two"]
    assert second.settled() == ["[worker-a.err] (pid=1) ERROR 11-30 two"]


def test_a_rotated_file_is_followed_to_its_end_and_the_new_one_from_its_start(tmp_path, relay):
    running = relay()
    path = tmp_path / "worker-r.err"
    writer = path.open("a", buffering=1)  # Ray's writer keeps its file open
    writer.write("(pid=1) ERROR 1\n")
    running.read_until(lambda lines: lines == ["[worker-r.err] (pid=1) ERROR 1"])
    inode = path.stat().st_ino
    with running.paused():  # all of the rotation between two of its passes
        writer.write("(pid=1) ERROR 2 before the rename\n")
        path.rename(tmp_path / "worker-r.err.1")  # not a name it follows
        writer.write("(pid=1) ERROR 3 after the rename, into the old file\n")
        writer.close()
        path.write_text("(pid=1) ERROR 4 in the new file\n")
        assert path.stat().st_ino != inode
    wanted = [
        "[worker-r.err] (pid=1) ERROR 1",
        "[worker-r.err] (pid=1) ERROR 2 before the rename",
        "[worker-r.err] (pid=1) ERROR 3 after the rename, into the old file",
        "[worker-r.err] (pid=1) ERROR 4 in the new file",
    ]
    running.read_until(lambda lines: len(lines) >= 4)
    with path.open("a") as log:
        log.write("(pid=1) ERROR 5 the new file goes on\n")
    running.read_until(lambda lines: len(lines) >= 5)
    assert running.settled() == wanted + ["[worker-r.err] (pid=1) ERROR 5 the new file goes on"]


def test_a_file_renamed_to_another_followed_name_is_not_read_again(tmp_path, relay):
    running = relay()
    path = tmp_path / "worker-m.out"
    writer = path.open("a", buffering=1)
    writer.write("(pid=1) ERROR 1\n")
    running.read_until(lambda lines: lines)
    with running.paused():
        path.rename(tmp_path / "worker-m-1.out")
        writer.write("(pid=1) ERROR 2\n")
        writer.close()
        path.write_text("(pid=1) ERROR 3\n")
    running.read_until(lambda lines: len(lines) >= 3)
    assert sorted(running.settled()) == [
        "[worker-m-1.out] (pid=1) ERROR 2",
        "[worker-m.out] (pid=1) ERROR 1",
        "[worker-m.out] (pid=1) ERROR 3",
    ]


def test_a_truncated_file_is_read_again_from_its_start(tmp_path, relay):
    running = relay()
    path = tmp_path / "worker-t.err"
    path.write_text("(pid=1) ERROR before the truncation\n" + "INFO noise\n" * 100)
    running.read_until(lambda lines: lines)
    inode = path.stat().st_ino
    with running.paused():
        with path.open("w") as log:  # O_TRUNC: the same file, shorter than what was read
            log.write("(pid=1) ERROR after the truncation\n")
        assert path.stat().st_ino == inode
    running.read_until(lambda lines: len(lines) >= 2)
    with running.paused():
        os.truncate(path, 0)  # as logrotate's copytruncate does
        with path.open("a") as log:
            log.write("(pid=1) ERROR after copytruncate\n")
    running.read_until(lambda lines: len(lines) >= 3)
    assert running.settled() == [
        "[worker-t.err] (pid=1) ERROR before the truncation",
        "[worker-t.err] (pid=1) ERROR after the truncation",
        "[worker-t.err] (pid=1) ERROR after copytruncate",
    ]


def test_an_over_long_line_is_cut_and_the_relay_goes_on(tmp_path, relay):
    running = relay()
    path = tmp_path / "worker-l.err"
    with path.open("ab", buffering=0) as log:
        log.write(b"(pid=1) ERROR 11-30 " + b"x" * 5000)  # in pieces, over several passes
        time.sleep(0.3)
        log.write(b"x" * 5000)
        time.sleep(0.3)
        log.write(b"x" * 5000 + b"\n")
        log.write(b"NIXL INFO Created 2 rails using provider=tcp " + b"y" * 2**20 + b"\n")  # in one piece
        log.write(b"z" * 10000 + b" ERROR 11-30 past the cut: not looked for\n")
        log.truncate(log.seek(0, os.SEEK_END) + 64 * 2**20)  # a 64 MiB line of NULs
        log.seek(0, os.SEEK_END)
        log.write(b"\n(pid=1) ERROR 11-30 after them\n")
    running.read_until(lambda lines: len(lines) >= 3)
    out = running.settled()
    assert len(out) == 3 and out[2] == "[worker-l.err] (pid=1) ERROR 11-30 after them"
    error, transport = (line.removeprefix("[worker-l.err] ") for line in out[:2])
    assert error == "(pid=1) ERROR 11-30 " + "x" * (8192 - 20) + CUT
    assert transport == "NIXL INFO Created 2 rails using provider=tcp " + "y" * (8192 - 45) + CUT
    assert matches(NON_EFA_PROVIDER, transport)  # what the alarm looks for is at the start: still counted


def _open_logs(pid: int, folder) -> list[str]:
    """The files under `folder` that process `pid` holds open (not its pipes or whatever else it inherited:
    a run without standard input, as CI's, gives it one more descriptor)."""
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder) + "/"):
            found.append(target)
    return found


def test_it_holds_at_most_200_files_open_and_opens_again_one_that_grows(tmp_path, relay):
    running = relay()
    names = [f"worker-many-{index:03}.out" for index in range(250)]
    for name in names:
        (tmp_path / name).write_text("(pid=1) ERROR first\n")
    running.read_until(lambda lines: len(lines) >= len(names), timeout=60)
    running.settled()
    assert 0 < len(_open_logs(running.proc.pid, tmp_path)) <= 200  # at any moment, not only between passes
    for name in names:
        with (tmp_path / name).open("a") as log:
            log.write("(pid=1) ERROR second\n")
    running.read_until(lambda lines: len(lines) >= 2 * len(names), timeout=60)
    assert sorted(running.settled()) == sorted(
        f"[{name}] (pid=1) ERROR {which}" for name in names for which in ("first", "second")
    )


def test_a_fifo_or_device_under_a_workers_name_is_skipped_and_the_relay_goes_on(tmp_path, relay):
    # open() of a FIFO waits for a writer: the relay would block there forever and the alarm go blind.
    running = relay()
    os.mkfifo(tmp_path / "worker-fifo.err")
    os.mkfifo(tmp_path / "elsewhere.fifo")
    (tmp_path / "worker-link.out").symlink_to(tmp_path / "elsewhere.fifo")  # followed to a FIFO
    (tmp_path / "worker-zero.out").symlink_to("/dev/zero")  # a device that never ends
    running.settled()
    (tmp_path / "worker-a.err").write_text("(pid=1) ERROR after the FIFO\n")
    running.read_until(lambda lines: lines == ["[worker-a.err] (pid=1) ERROR after the FIFO"])
    assert running.settled() == ["[worker-a.err] (pid=1) ERROR after the FIFO"]


@pytest.mark.parametrize("longer", [True, False], ids=["grown-past-the-offset", "grown-back-to-it"])
def test_a_copytruncate_that_grows_again_within_one_pass_is_read_from_its_start(tmp_path, relay, longer):
    # Truncated and written again between two passes: no size below what was read to tell it, only the
    # bytes read last no longer where they were.
    running = relay()
    path = tmp_path / "worker-c.err"
    old = "(pid=1) ERROR before the copytruncate\n" + "INFO noise\n" * 10
    path.write_text(old)
    running.read_until(lambda lines: lines == ["[worker-c.err] (pid=1) ERROR before the copytruncate"])
    new = "(pid=1) ERROR first after the copytruncate\n"
    new += "INFO quiet\n" * ((len(old) - len(new)) // len("INFO quiet\n"))
    new = new.ljust(len(old) - 1, "x") + "\n"  # exactly as long as what was read
    if longer:
        new += "(pid=1) ERROR second after the copytruncate\n"
    inode = path.stat().st_ino
    with running.paused():
        time.sleep(0.05)  # another modification time than the last pass saw
        os.truncate(path, 0)  # logrotate's copytruncate
        with path.open("a") as log:
            log.write(new)
        assert path.stat().st_ino == inode and path.stat().st_size >= len(old)
    wanted = [
        "[worker-c.err] (pid=1) ERROR before the copytruncate",
        "[worker-c.err] (pid=1) ERROR first after the copytruncate",
    ]
    if longer:
        wanted.append("[worker-c.err] (pid=1) ERROR second after the copytruncate")
    running.read_until(lambda lines: len(lines) >= len(wanted))
    assert running.settled() == wanted
