"""What the rehearsal host offers: its GPUs (nvidia-smi), whether it has an EFA device, and how many files a process
may open."""

from __future__ import annotations

import resource
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Ray's node IP on the host: every engine, side channel and endpoint stays on loopback.
NODE_IP = "127.0.0.1"
QUERY = ["nvidia-smi", "--query-gpu=name,memory.total,compute_cap", "--format=csv,noheader,nounits"]


class HostError(Exception):
    """The host cannot run the rehearsal; the message is one line with the fix."""


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int
    compute_capability: str  # e.g. "9.0" (Hopper), "8.9" (Ada: L4)

    @property
    def major(self) -> int:
        return int(self.compute_capability.split(".")[0])


@dataclass(frozen=True)
class Host:
    gpus: tuple[Gpu, ...]
    efa_devices: tuple[str, ...]
    # The hard RLIMIT_NOFILE Ray's processes inherit: a process may raise its own soft limit that far, no further.
    # None: not known (nothing is sized by it).
    open_files: int | None = None

    @property
    def has_efa(self) -> bool:
        return bool(self.efa_devices)

    def describe(self) -> str:
        names = sorted({g.name for g in self.gpus})
        efa = f"{len(self.efa_devices)} EFA device(s)" if self.has_efa else "no EFA device"
        return f"{len(self.gpus)} x {', '.join(names)} (compute {self.gpus[0].compute_capability}), {efa}"


def parse_gpus(text: str) -> tuple[Gpu, ...]:
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3:
            raise HostError(f"nvidia-smi printed an unexpected line: {line.strip()[:120]!r}")
        name, memory, capability = parts
        try:
            gpus.append(Gpu(name=name, memory_mib=int(float(memory)), compute_capability=capability))
        except ValueError:
            raise HostError(f"nvidia-smi printed an unexpected line: {line.strip()[:120]!r}") from None
    return tuple(gpus)


def efa_devices(sysfs: Path = Path("/sys/class/infiniband")) -> tuple[str, ...]:
    """RDMA devices bound to the `efa` kernel driver (what libfabric's efa provider needs)."""
    if not sysfs.is_dir():
        return ()
    found = []
    for device in sorted(sysfs.iterdir()):
        driver = device / "device" / "driver"
        try:
            if driver.resolve().name == "efa":
                found.append(device.name)
        except OSError:
            continue
    return tuple(found)


def detect(
    *,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    sysfs: Path = Path("/sys/class/infiniband"),
    query: Sequence[str] = QUERY,
) -> Host:
    try:
        done = run(list(query), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise HostError("nvidia-smi not found: the rehearsal needs a Linux host with NVIDIA GPUs and drivers") from None
    except subprocess.TimeoutExpired:
        raise HostError("nvidia-smi did not answer within 60 s") from None
    if done.returncode != 0:
        detail = " ".join((done.stderr or done.stdout or "").split())[:160]
        raise HostError(f"nvidia-smi failed (exit {done.returncode}): {detail}")
    gpus = parse_gpus(done.stdout)
    if not gpus:
        raise HostError("nvidia-smi lists no GPU")
    return Host(gpus=gpus, efa_devices=efa_devices(sysfs), open_files=open_files_limit())


def open_files_limit() -> int | None:
    """This process's hard limit on open files (the ray start it runs inherits it); None when unlimited."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return None if hard == resource.RLIM_INFINITY else hard
