"""The worker pods' log relay: NIXL's transport lines, from Ray's log files to the container log.

Ray writes every actor's and replica's output (vLLM's and NIXL's lines among them) to files under
`/tmp/ray/session_latest/logs` in the pod, not to the container's stdout/stderr, so the CloudWatch
add-on's Fluent Bit never sees them and the NIXL-not-on-EFA alarm (stacks/alarms.py) would never fire.
`RAY_LOG_TO_STDERR=1` would move them, but takes the files away from the Ray dashboard's log API, which
`ops verify` reads. So a second container in each worker pod follows those files on a shared `/tmp/ray`
volume and prints only the lines that show NIXL's transport (and ERROR lines) to its own stdout.

KubeRay mounts nothing at /tmp/ray unless the autoscaler runs, and leaves a mount that is already there
alone (ray-operator/controllers/ray/common/pod.go: `RayLogVolumeMountPath`, `addEmptyDir`); it treats the
first container as the Ray container (`utils.RayContainerIndex`), so the relay comes second.

The relay is `RELAY_PROGRAM`: standard library only, run by the Ray image's own Python (no other image
to pin or pull). tests/charts/test_log_relay.py runs it on real files: what it forwards classifies and
alarms exactly as the full logs do, for the rehearsal's real NIXL lines and `ops verify`'s fixtures.

Its memory does not grow with the logs (the container has 128Mi; a worker's log reaches gigabytes): it
reads 64 KiB at a time and holds at most 8 KiB of a line; a longer line is forwarded cut to its first 8 KiB
(the markers are looked for there) with " [... cut by the log relay]", and the rest of it is skipped. The
files already there when it starts are followed from their end (its comment says why); a file that
appears later, or a new file under a followed name (another inode: rotated), is read from its start, after
what is left of the old one, which it still holds open. A file rewritten in place is read again from its
start: shorter than what was read (truncated), or no longer holding the last bytes read where they were
(copytruncate, then grown past the old offset within one pass; checked when its size or modification time
changed). Only regular files are followed: a FIFO, socket or device under a worker's name is skipped
(opened non-blocking if at all, so a FIFO cannot hold the relay, and the alarm, waiting for a writer).

The relay's container, its volume and mounts are built with the other pod parts, typed, in charts/ray_pods.py
(`relay_container`, `ray_logs_volume`, `ray_logs_mount`).
"""

from __future__ import annotations

CONTAINER = "ray-log-relay"
VOLUME = "ray-logs"
RAY_TMP = "/tmp/ray"

RELAY_PROGRAM = r"""import glob, os, stat, sys, time
LOGS = os.environ.get("RELAY_LOGS", "/tmp/ray/session_latest/logs")
POLL = float(os.environ.get("RELAY_POLL_SECONDS", "2"))
MARKERS = (b"rails using provider=", b"Backend LIBFABRIC was instantiated", b"Backend UCX was instantiated",
           b"Skipping backend registration", b" ERROR ")
ANY = tuple(marker.strip() for marker in MARKERS)  # in a run of whole lines, before looking at each one
CHUNK = 65536  # the most read at once: the container has 128Mi, a worker's log can grow to gigabytes
LONGEST = 8192  # a longer line: its first LONGEST bytes (markers looked for there only) and CUT
CUT = " [... cut by the log relay]"
MOST_OPEN = 200  # files held open (a rotated file is read to its end through its descriptor); past that,
# the ones idle longest are closed, and opened again when they grow
MARK = 256  # the last bytes read of a file, looked for again where they were: gone, the file was rewritten
# O_NONBLOCK: a FIFO under a worker's name opens at once instead of waiting for a writer (it is then refused
# as not a regular file); reads of a regular file ignore the flag (POSIX open(2)). O_NOFOLLOW: the path is
# already realpath()'s, so a link there now is a swap since: refused (ELOOP), the next pass looks again.
FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class Follow:
    def __init__(self, real, name, ident, log):
        self.real, self.name, self.ident, self.log = real, name, ident, log
        self.pos, self.partial, self.skip, self.idle = 0, b"", False, 0
        self.mark, self.mtime = b"", None  # the bytes just before pos; the mtime when they were checked


def ident(st):
    return st.st_dev, st.st_ino


def emit(name, line, cut=False):
    if any(marker in b" " + line for marker in MARKERS):  # " ERROR " at the start of a line too
        sys.stdout.write("[" + name + "] " + line.decode("utf-8", "replace") + (CUT if cut else "") + "\n")


def hold(f, rest):  # the start of a line not ended yet: at most LONGEST bytes of it, the rest skipped
    if f.skip or not rest:
        return
    if len(f.partial) + len(rest) > LONGEST:
        emit(f.name, (f.partial + rest)[:LONGEST], True)
        f.partial, f.skip = b"", True
    else:
        f.partial += rest


def feed(f, data):
    end = data.find(b"\n")
    if end < 0:
        return hold(f, data)
    if f.skip:  # the end of a line cut (or begun before the relay started)
        f.skip = False
    else:
        line, f.partial = f.partial + data[:end], b""
        emit(f.name, line[:LONGEST], len(line) > LONGEST)
    last = data.rfind(b"\n")
    if last > end and any(data.find(marker, end, last) >= 0 for marker in ANY):
        for line in data[end + 1:last].split(b"\n"):
            emit(f.name, line[:LONGEST], len(line) > LONGEST)
    hold(f, data[last + 1:])


def read(f, most):
    data = f.log.read(min(most, CHUNK))
    f.pos += len(data)
    f.mark = (f.mark + data)[-MARK:]
    feed(f, data)
    return len(data)


def open_log(real, want):  # a regular file, the one stat()ed (ident `want`), else None; never blocks
    fd = os.open(real, FLAGS)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or ident(st) != want:  # a FIFO, a device; or replaced since the stat
        os.close(fd)
        return None
    return os.fdopen(fd, "rb", buffering=0)


def rewritten(f, st):  # truncated, shorter than what was read; or truncated and grown again past it in one
    # pass (copytruncate, then the writer's next lines): the bytes read last are no longer where they were
    if st.st_size < f.pos:
        return True
    if not f.mark or f.log is None or (st.st_size == f.pos and st.st_mtime_ns == f.mtime):
        return False
    f.mtime = st.st_mtime_ns
    return os.pread(f.log.fileno(), len(f.mark), f.pos - len(f.mark)) != f.mark


def drain(f):  # a file gone from its name (rotated away, removed): what is left of it, if still open
    if f.log is not None:
        try:
            while read(f, CHUNK):
                pass
        except OSError:
            pass
        f.log.close()
    if f.partial and not f.skip:  # its last line, ended by the end of the file
        emit(f.name, f.partial)


def room():  # before a file is opened: at most MOST_OPEN at any time, the one idle longest closed first
    opened = [g for g in files.values() if g.log is not None]
    if len(opened) >= MOST_OPEN:
        victim = max(opened, key=lambda g: g.idle)
        victim.log.close()
        victim.log = None


def follow(real, name, st, at_end):
    room()
    log = open_log(real, ident(st))
    if log is None:  # not a regular file, or replaced since the stat: the next pass
        return None
    f = Follow(real, name, ident(st), log)
    if at_end and st.st_size:
        log.seek(st.st_size - 1)
        f.skip = log.read(1) != b"\n"  # inside a line begun before the start: skip to its end
        f.pos = log.tell()
        f.mark = os.pread(log.fileno(), min(MARK, f.pos), f.pos - min(MARK, f.pos))
    f.mtime = st.st_mtime_ns
    return f


def step(f, st):
    if f.log is None and st.st_size > f.pos:  # closed while idle, grown since
        room()
        f.log = open_log(f.real, f.ident)
        if f.log is None:
            return
        f.log.seek(f.pos)
    if rewritten(f, st):  # the same file (inode), rewritten: from its start again
        f.pos, f.partial, f.skip, f.mark = 0, b"", False, b""
        if f.log is not None:
            f.log.seek(0)
    if st.st_size == f.pos:
        f.idle += 1
        return
    f.idle = 0
    if f.log is None:
        room()
        f.log = open_log(f.real, f.ident)
        if f.log is None:
            return
        f.log.seek(f.pos)
    most = st.st_size - f.pos  # what is there now; what is written meanwhile, the next pass
    while most > 0:
        got = read(f, most)
        if not got:
            break
        most -= got


# Files already there at the start are followed from their end, only new lines forwarded: a restart of
# the container loses what the relay had read, and it cannot keep an offset file (its only volume,
# /tmp/ray, is read-only to it), so reading them from 0 again would forward old lines a second time and
# the alarm would count them twice. The price: lines written while the relay was down are not forwarded.
# A file that appears later is new and read from its start; so is a new file under a followed name.
files, first = {}, True
while True:
    now = {}
    for path in glob.glob(os.path.join(LOGS, "worker-*.out")) + glob.glob(os.path.join(LOGS, "worker-*.err")):
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):  # not a FIFO, socket or device: opening one may block or never end
            now[real] = (os.path.basename(path), st)
    where = {ident(st): real for real, (name, st) in now.items()}
    gone = [files.pop(real) for real in list(files) if real not in now or ident(now[real][1]) != files[real].ident]
    for f in gone:  # rotated or removed: followed on under its new name if that is one of ours, else drained
        moved = where.get(f.ident)
        if moved is not None and moved not in files:
            f.real, f.name = moved, now[moved][0]
            files[moved] = f
        else:
            drain(f)
    for real in sorted(now):
        name, st = now[real]
        try:
            f = files.get(real)
            if f is None:
                f = follow(real, name, st, first)
                if f is None:
                    continue
                files[real] = f
            step(f, st)
        except OSError:
            pass
    opened = [f for f in files.values() if f.log is not None]
    for f in sorted(opened, key=lambda f: f.idle)[MOST_OPEN:]:
        f.log.close()
        f.log = None
    first = False
    sys.stdout.flush()
    time.sleep(POLL)
"""
