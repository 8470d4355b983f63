"""What Ray keeps under /tmp/ray in a Ray pod, and the bound the pod templates put on it (charts/ray_pods.py: an
emptyDir with this size limit, the Ray container's ephemeral-storage request, and the rotation variables below).

Ray 2.58 keeps its session there (/tmp/ray/session_<time>/, `session_latest` linking to it):
- its logs, one file or more per process under logs/. Ray rotates a file at RAY_ROTATION_MAX_BYTES and keeps
  RAY_ROTATION_BACKUP_COUNT old ones, 512 MiB and 5 when unset (ray/_common/ray_constants.py LOGGING_ROTATE_BYTES
  and LOGGING_ROTATE_BACKUP_COUNT, read in ray/_private/node.py): up to 3 GiB a file. A worker's own .out and
  .err are rotated only when RAY_ROTATION_MAX_BYTES is set (ray/_private/workers/default_worker.py), so unset
  they grow without end. The node hands its values to each process it starts (ray/_private/services.py,
  --logging-rotate-bytes and --logging-rotate-backup-count) and Serve's log files take them too
  (ray/serve/_private/logging_utils.py).
- spilled objects: without a spilling directory the object store spills into the session folder
  (ray/_private/node.py `_get_object_spilling_config`; ray/_private/external_storage.py writes
  `ray_spilled_objects_<node>` there). The PD application passes requests and responses through the object
  store, never the KV cache (NIXL moves that), so a spill is an exception; an allowance covers it with the
  session's own small files (sockets, ports, the serve config). The serve config has no runtime_env, so no
  package is unpacked there.

Past the size limit the kubelet evicts the pod (kubernetes v1.35.4 pkg/kubelet/eviction/eviction_manager.go,
`emptyDirLimitEviction`) and KubeRay makes a new one: one Ray pod restarts, where an unbounded /tmp/ray would fill the node's
root volume, which also holds the images and the weight cache."""

from __future__ import annotations

import math

# Rotation: a log file and its backups hold at most ROTATION_BYTES * (1 + BACKUPS) (48 MiB).
ROTATION_BYTES = 16 * 2**20
BACKUPS = 2
# Log files a Ray pod writes at once: the PD rehearsal's host, head and both engines together, had 46 and 60
# worker .out/.err files (evidence/2026-12-03-h200-libfabric/runs/lf-full-workers.txt,
# 2026-12-02-h200-cuda-ipc/runs/lf-pd-workers.txt); twice the larger count covers a pod's core-worker and
# system logs (raylet, dashboard agent, runtime-env agent, Serve's).
LOG_FILES = 128
# Spilled objects and the session's own files.
SPILL_AND_SESSION_GIB = 2


def size_limit_gib() -> int:
    """/tmp/ray's bound: every log file at its rotated maximum, and the allowance."""
    logs = LOG_FILES * ROTATION_BYTES * (1 + BACKUPS) / 2**30
    return math.ceil(logs + SPILL_AND_SESSION_GIB)


def rotation_environment() -> list[dict[str, str]]:
    """The Ray container's rotation variables, as plain data (charts/ray_pods.py types them)."""
    return [
        {"name": "RAY_ROTATION_MAX_BYTES", "value": str(ROTATION_BYTES)},
        {"name": "RAY_ROTATION_BACKUP_COUNT", "value": str(BACKUPS)},
    ]
