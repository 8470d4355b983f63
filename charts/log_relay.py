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
"""
from __future__ import annotations

from typing import Any

CONTAINER = "ray-log-relay"
VOLUME = "ray-logs"
RAY_TMP = "/tmp/ray"

RELAY_PROGRAM = r'''import glob, os, sys, time
LOGS = os.environ.get("RELAY_LOGS", "/tmp/ray/session_latest/logs")
POLL = float(os.environ.get("RELAY_POLL_SECONDS", "2"))
MARKERS = ("rails using provider=", "Backend LIBFABRIC was instantiated", "Backend UCX was instantiated",
           "Skipping backend registration", " ERROR ")
LONGEST = 65536
offsets, partial = {}, {}
while True:
    for path in sorted(glob.glob(os.path.join(LOGS, "worker-*.out")) + glob.glob(os.path.join(LOGS, "worker-*.err"))):
        try:
            real = os.path.realpath(path)
            size = os.path.getsize(real)
            start = offsets.get(real, 0)
            if size < start:
                start = 0
                partial.pop(real, None)
            if size == start:
                continue
            with open(real, "rb") as log:
                log.seek(start)
                data = log.read(size - start)
        except OSError:
            continue
        offsets[real] = start + len(data)
        lines = (partial.pop(real, b"") + data).split(b"\n")
        if lines[-1]:
            partial[real] = lines[-1][-LONGEST:]
        name = os.path.basename(path)
        for raw in lines[:-1]:
            line = raw.decode("utf-8", "replace")
            if any(marker in " " + line for marker in MARKERS):  # " ERROR " at the start of a line too
                sys.stdout.write("[" + name + "] " + line + "\n")
        sys.stdout.flush()
    time.sleep(POLL)
'''


def ray_logs_volume() -> dict[str, Any]:
    return {"name": VOLUME, "emptyDir": {}}


def ray_logs_mount(*, read_only: bool = False) -> dict[str, Any]:
    return {"name": VOLUME, "mountPath": RAY_TMP, **({"readOnly": True} if read_only else {})}


def relay_container(image: str) -> dict[str, Any]:
    """The relay: the Ray image's Python, no privileges, a read-only view of /tmp/ray."""
    return {
        "name": CONTAINER,
        "image": image,
        "command": ["python3", "-B", "-u", "-c", RELAY_PROGRAM],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [ray_logs_mount(read_only=True)],
    }
