"""Rules of the `serving.weight_cache` section (docs/STAGE_FILE.md): which host and container folders it may use
(an allowlist)."""

from __future__ import annotations

import re

from ..errors import ConfigError, short
from ..schema import StageConfig

# --- serving.weight_cache -----------------------------------------------------------------------------------
# A privileged container writes the hostPath as root, so the host path is the project's one folder on the root
# volume or below it (an allowlist: a denylist of system folders always leaks).
# Why: docs/DECISIONS.md, "Weight cache on the node's root volume".
HOST_ROOT = "/var/lib/model-cache"
# Inside the Ray container the cache is mounted where nothing of the image or the pod lives (checked by
# tests/config/test_workload_rules.py against the rendered pod).
# Why: docs/DECISIONS.md, "Weight cache on the node's root volume".
MOUNT_ROOTS = ("/model-cache", "/models")  # the folder itself, or below it
MOUNT_PARENTS = ("/mnt",)  # only below it
# One segment of a path in normal form: letters, digits, '.', '_' and '-', not starting with '.' or '-' (so
# never '.', '..', a hidden name or an option-looking name), at most 64 characters.
SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def _path_problem(value: str) -> str | None:
    """What keeps `value` from being an absolute path in normal form, or None."""
    if not value.startswith("/"):
        return "is not an absolute path"
    segments = value[1:].split("/")
    if "" in segments:
        return "has an empty segment ('//' or a trailing '/')"
    for segment in segments:
        if segment in (".", ".."):
            return f"has a '{segment}' segment"
        if not SEGMENT.fullmatch(segment):
            return (
                f"has the segment {short(segment)}, which is not a plain name (allowed: letters, digits, "
                "'.', '_' and '-', not starting with '.' or '-', at most 64 characters)"
            )
    return None


def _under(value: str, root: str) -> bool:
    return value.startswith(root + "/")


def weight_cache(cfg: StageConfig, path: str) -> None:
    cache = cfg.serving.weight_cache
    form = "allowed: an absolute path of plain names joined by single '/', no '.' or '..' segment, no trailing '/'"
    problem = _path_problem(cache.host_path)
    if problem:
        raise ConfigError(path, "serving.weight_cache.host_path", f"{short(cache.host_path, 80)} {problem} ({form})")
    if cache.host_path != HOST_ROOT and not _under(cache.host_path, HOST_ROOT):
        raise ConfigError(
            path,
            "serving.weight_cache.host_path",
            f"{cache.host_path} is outside the node's weight cache folder: the worker pod writes its "
            "hostPath as root (no runAsNonRoot, privileged by default), so any other folder of the "
            "node (its OS, kubelet or container runtime state) is root on the node (allowed: "
            f"{HOST_ROOT}, or a folder under {HOST_ROOT}/)",
        )
    problem = _path_problem(cache.mount_path)
    if problem:
        refused = ", which Kubernetes refuses in a mount path" if problem == "has a '..' segment" else ""
        raise ConfigError(
            path, "serving.weight_cache.mount_path", f"{short(cache.mount_path, 80)} {problem}{refused} ({form})"
        )
    mount = cache.mount_path
    if not (mount in MOUNT_ROOTS or any(_under(mount, root) for root in MOUNT_ROOTS + MOUNT_PARENTS)):
        raise ConfigError(
            path,
            "serving.weight_cache.mount_path",
            f"{mount} is outside the folders the cache may be mounted at in the Ray container: it "
            "would cover the image's own folders or clash with the pod's mounts (/dev/shm, /tmp/ray, "
            "the token's /var/run/secrets/huggingface) (allowed: "
            f"{', '.join(MOUNT_ROOTS)}, or a folder under "
            f"{', '.join(root + '/' for root in MOUNT_ROOTS + MOUNT_PARENTS)})",
        )
