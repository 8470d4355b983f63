"""NIXL alone, between two processes on one host: does a backend load, register this memory and move bytes, and how fast.

  python3 -m serving_lab.rehearse.nixl_probe --out DIR [--case NAME ...] [--sizes 32,128] [--desc-kib 1024]

What PD does between its engines, without vLLM: a target process (the prefill engine's role) registers a
source buffer; an initiator process (decode's role: vLLM's NixlPullConnector reads) registers a destination, loads
the target's metadata and READs the source in descriptors of --desc-kib each, timed from the request's creation to
its completion (`initialize_xfer` + `transfer` + polling `check_xfer_state`), then checks every byte. The first
transfer of each size is reported apart (connection set-up, registration caches), the rest as a median.

Each case (CASES: a backend, a memory type, an environment such as UCX_TLS or FI_PROVIDER) runs as its own pair of
processes with a time limit, so one that fails, hangs or crashes (libfabric's tcp provider handed a GPU pointer as
host memory) is a result, not the end of the run. Results: DIR/nixl-probe.json (one entry a case) and
DIR/nixl-probe-<case>.log (the processes' output: NIXL's and UCX's own lines, e.g. UCX_PROTO_INFO's table of the
transports it chose). The last lines printed are a table.

LIBFABRIC needs a libfabric.so.1 that exports FABRIC_1.7 (serving_lab/pins/libfabric.debs): --libfabric DIR (default
$REHEARSAL_LIBFABRIC) puts DIR/lib first on LD_LIBRARY_PATH for the LIBFABRIC cases.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.cli_options import OneLineParser, number, output_folder, text

MiB = 2**20
RESULT_PREFIX = "NIXL_PROBE_RESULT "  # the line a case prints its JSON entry on


@dataclass(frozen=True)
class Case:
    name: str
    backend: str  # UCX or LIBFABRIC
    mem: str  # VRAM (CUDA memory on both sides) or DRAM
    env: dict[str, str] = field(default_factory=dict)
    why: str = ""


# UCX_PROTO_INFO=y prints, per endpoint and operation, the protocols and transports UCX selected (UCX >= 1.15).
_UCX_INFO = {"UCX_PROTO_INFO": "y"}
# libfabric on one host without EFA: the tcp provider (what NIXL's plugin picks after cxi and efa:
# src/utils/libfabric/libfabric_common.cpp getAvailableNetworkDevices), its own log lines at info. Its interface:
# --fi-tcp-iface (FI_TCP_IFACE). On loopback (lo) NIXL's rail failed on the H200 host ("socket listen failed",
# then "fi_enable failed for rail 0: Bad file descriptor"); on eth0 it moved host memory.
_FI_TCP = {"FI_PROVIDER": "tcp", "FI_LOG_LEVEL": "info", "FI_LOG_PROV": "tcp"}

CASES: dict[str, Case] = {
    case.name: case
    for case in (
        Case("ucx-vram", "UCX", "VRAM", _UCX_INFO, "UCX as PD runs it (no UCX_TLS): which transports does it pick?"),
        Case(
            "ucx-vram-cuda-ipc",
            "UCX",
            "VRAM",
            {**_UCX_INFO, "UCX_TLS": "cuda_ipc,cuda_copy,tcp"},
            "CUDA IPC between the processes, TCP only for UCX's own wire-up",
        ),
        Case(
            "ucx-vram-no-ipc",
            "UCX",
            "VRAM",
            {**_UCX_INFO, "UCX_TLS": "tcp,cuda_copy"},
            "no CUDA IPC: staged through host memory over TCP (what a cross-node path without GPUDirect does)",
        ),
        Case(
            "ucx-vram-ipc-reads",
            "UCX",
            "VRAM",
            {**_UCX_INFO, "UCX_CUDA_IPC_ENABLE_GET_ZCOPY": "y"},
            "CUDA IPC reads on a GPU without NVLink, where UCX turns them off (what ops rehearse sets on one host)",
        ),
        Case("ucx-dram", "UCX", "DRAM", _UCX_INFO, "host memory on both sides"),
        Case("libfabric-dram", "LIBFABRIC", "DRAM", _FI_TCP, "the stage's backend, host memory, tcp provider"),
        Case(
            "libfabric-vram",
            "LIBFABRIC",
            "VRAM",
            _FI_TCP,
            "the stage's backend with CUDA memory: the tcp provider has no FI_HMEM, so NIXL registers it as host memory",
        ),
    )
}
DEFAULT_CASES = tuple(CASES)


def _nixl():
    try:
        # the shim vLLM imports (nixl -> nixl_cu13); NIXL and torch are the GPU host's, not this venv's
        from nixl._api import nixl_agent, nixl_agent_config  # type: ignore[import-not-found]
    except ImportError:
        from nixl_cu13._api import nixl_agent, nixl_agent_config  # type: ignore[import-not-found]
    return nixl_agent, nixl_agent_config


def _buffer(mem: str, nbytes: int, fill: bool):
    import torch

    if mem == "VRAM":
        buf = torch.empty(nbytes, dtype=torch.uint8, device="cuda:0")
    else:
        buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    if fill:
        gen = torch.Generator().manual_seed(35)
        buf.copy_(torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=gen))
    else:
        buf.fill_(0xA5)  # poisoned: a byte nobody wrote shows
    return buf


def _agent(name: str, backend: str):
    nixl_agent, nixl_agent_config = _nixl()
    return nixl_agent(name, nixl_agent_config(backends=[backend]))


def descs(base: int, nbytes: int, desc_bytes: int, dev: int) -> list[tuple[int, int, int]]:
    """(address, length, device) for `nbytes` from `base` in pieces of `desc_bytes` (the last one shorter)."""
    out, offset = [], 0
    while offset < nbytes:
        length = min(desc_bytes, nbytes - offset)
        out.append((base + offset, length, dev))
        offset += length
    return out


def _target(conn, backend: str, mem: str, nbytes: int) -> None:
    """The prefill engine's role: register the source, hand over metadata and descriptors, wait."""
    try:
        agent = _agent("target", backend)
        src = _buffer(mem, nbytes, fill=True)
        agent.register_memory([(src.data_ptr(), nbytes, 0, "")], mem)
        conn.send({"meta": agent.get_agent_metadata(), "base": src.data_ptr()})
        peer = conn.recv()
        agent.add_remote_agent(peer["meta"])
        conn.recv()  # "done"
    except Exception as exc:  # noqa: BLE001 - NIXL's errors are the result: the initiator writes them down
        conn.send({"error": f"target: {type(exc).__name__}: {exc}"})


@dataclass(frozen=True)
class _Link:
    """The initiator's side of one case once connected to its target: what each size's transfers use."""

    agent: Any
    peer: str  # the target agent's name
    dst: Any  # the destination buffer
    remote_base: int  # the target's source buffer
    mem: str
    nbytes: int
    desc_bytes: int
    repeat: int
    expected: Any  # VRAM: the source's bytes in host memory; DRAM: None (made afresh per size)
    sync: Callable[[], None]  # VRAM: the poisoning fill is on the GPU before the clock starts


def run_case(case: Case, sizes_mib: list[int], desc_bytes: int, repeat: int) -> dict[str, Any]:
    """One case in this process (the initiator), its target in a spawned child. Returns the result entry."""
    import torch

    result: dict[str, Any] = {"case": case.name, "backend": case.backend, "mem": case.mem, "env": case.env}
    nbytes = max(sizes_mib) * MiB
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_target, args=(child, case.backend, case.mem, nbytes), daemon=True)
    proc.start()
    try:
        sync = torch.cuda.synchronize if case.mem == "VRAM" else _no_sync
        link = _connect(case, parent, result, nbytes=nbytes, desc_bytes=desc_bytes, repeat=repeat, sync=sync)
        if link is None:
            return result
        rows = [_measure(link, size) for size in sizes_mib]
        result["rows"] = rows
        result["ok"] = all(row["wrong_bytes"] == 0 for row in rows)
    except Exception as exc:  # noqa: BLE001 - a backend that fails to load, register or move is a result
        result["error"] = f"initiator: {type(exc).__name__}: {exc}"
    finally:
        _stop_target(parent, proc, result)
    return result


def _no_sync() -> None:
    pass


def _connect(
    case: Case,
    parent,
    result: dict[str, Any],
    *,
    nbytes: int,
    desc_bytes: int,
    repeat: int,
    sync: Callable[[], None],
) -> _Link | None:
    """The initiator's agent and destination registered, metadata swapped with the target (setup_s); None with
    result["error"] set when the backend did not load or the target failed."""
    started = time.monotonic()
    agent = _agent("initiator", case.backend)
    if case.backend not in agent.backends:
        result["error"] = f"backend {case.backend} was not instantiated (plugins: {agent.plugin_list})"
        return None
    dst = _buffer(case.mem, nbytes, fill=False)
    agent.register_memory([(dst.data_ptr(), nbytes, 0, "")], case.mem)
    hello = parent.recv()
    if "error" in hello:
        result["error"] = hello["error"]
        return None
    name = agent.add_remote_agent(hello["meta"])
    parent.send({"meta": agent.get_agent_metadata()})
    result["setup_s"] = round(time.monotonic() - started, 3)
    expected = _buffer("DRAM", nbytes, fill=True) if case.mem == "VRAM" else None
    return _Link(agent, name, dst, hello["base"], case.mem, nbytes, desc_bytes, repeat, expected, sync)


def _measure(link: _Link, size: int) -> dict[str, Any]:
    """One size: the first READ and `repeat` more, timed, then every byte checked. Its row of the result."""
    size_bytes = size * MiB
    pieces = descs(link.dst.data_ptr(), size_bytes, link.desc_bytes, 0)
    local = link.agent.get_xfer_descs(pieces, link.mem)
    remote = link.agent.get_xfer_descs(descs(link.remote_base, size_bytes, link.desc_bytes, 0), link.mem)
    times = [_read_once(link, local, remote, size) for _ in range(link.repeat + 1)]
    got = link.dst[:size_bytes].cpu() if link.mem == "VRAM" else link.dst[:size_bytes]
    want = (link.expected if link.expected is not None else _buffer("DRAM", link.nbytes, fill=True))[:size_bytes]
    wrong = int((got != want).sum())
    warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
    return {
        "mib": size,
        "descs": len(pieces),
        "first_ms": round(times[0] * 1e3, 3),
        "median_ms": round(warm * 1e3, 3),
        "min_ms": round(min(times[1:] or times) * 1e3, 3),
        "gib_per_s": round(size_bytes / warm / 2**30, 3),
        "wrong_bytes": wrong,
    }


def _read_once(link: _Link, local, remote, size: int) -> float:
    """One READ of `size` MiB into the poisoned destination, timed from the request's creation to its completion."""
    link.dst[: size * MiB].fill_(0xA5)
    link.sync()
    t0 = time.perf_counter()
    handle = link.agent.initialize_xfer("READ", local, remote, link.peer)
    state = link.agent.transfer(handle)
    deadline = t0 + 60
    while state == "PROC" and time.perf_counter() < deadline:
        state = link.agent.check_xfer_state(handle)
    elapsed = time.perf_counter() - t0
    link.agent.release_xfer_handle(handle)
    if state != "DONE":
        raise RuntimeError(f"transfer of {size} MiB ended in state {state} after {elapsed:.1f} s")
    return elapsed


def _stop_target(parent, proc, result: dict[str, Any]) -> None:
    """Tell the target it is done, give it 10 s, then kill it; its exit code goes in the result."""
    try:
        parent.send("done")
    except (BrokenPipeError, OSError):
        pass
    proc.join(timeout=10)
    if proc.is_alive():
        proc.kill()
    result.setdefault("target_exit", proc.exitcode)


def case_env(
    case: Case, libfabric: str | None, base: dict[str, str] | None = None, tcp_iface: str | None = None
) -> dict[str, str]:
    """The environment one case runs in: this one, the case's variables, and for LIBFABRIC FI_TCP_IFACE (if given)
    and the carried libfabric's lib/ first on LD_LIBRARY_PATH."""
    env = dict(os.environ if base is None else base)
    env.update(case.env)
    env.setdefault("NIXL_LOG_LEVEL", "INFO")
    if case.backend == "LIBFABRIC" and tcp_iface:
        env["FI_TCP_IFACE"] = tcp_iface
    if case.backend == "LIBFABRIC" and libfabric:
        lib = str(Path(libfabric) / "lib")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = [f"{'case':<20} {'MiB':>5} {'descs':>5} {'first ms':>9} {'median ms':>9} {'GiB/s':>7}  result"]
    for res in results:
        if "rows" not in res:
            lines.append(
                f"{res['case']:<20} {'-':>5} {'-':>5} {'-':>9} {'-':>9} {'-':>7}  {res.get('error', 'no result')}"
            )
            continue
        for row in res["rows"]:
            verdict = "ok" if row["wrong_bytes"] == 0 else f"{row['wrong_bytes']} bytes wrong"
            lines.append(
                f"{res['case']:<20} {row['mib']:>5} {row['descs']:>5} {row['first_ms']:>9.2f} "
                f"{row['median_ms']:>9.2f} {row['gib_per_s']:>7.2f}  {verdict}"
            )
    return lines


def _one(args) -> int:
    """--one CASE: run one case here and print its JSON entry on the last line (the driver's child)."""
    case = CASES[args.one]
    result = run_case(case, args.sizes, args.desc_kib * 1024, args.repeat)
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


def _sizes(value: str) -> list[int]:
    """--sizes: transfer sizes in MiB, 1 to 65536 each."""
    return [number(int, 1, 65_536)(part) for part in value.split(",")]


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="nixl_probe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=output_folder, help="folder for nixl-probe.json and the logs")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="repeatable; default: all")
    parser.add_argument("--sizes", type=_sizes, default=[32, 128], help="MiB, comma-separated (default 32,128)")
    parser.add_argument(
        "--desc-kib", type=number(int, 1, 2**20), default=1024, help="bytes per descriptor, in KiB (default 1024)"
    )
    parser.add_argument(
        "--repeat", type=number(int, 0, 10_000), default=5, help="timed transfers after the first (default 5)"
    )
    parser.add_argument(
        "--timeout", type=number(float, 1, 86_400), default=90, help="seconds a case may take (default 90)"
    )
    parser.add_argument(
        "--libfabric", type=text, default=os.environ.get("REHEARSAL_LIBFABRIC") or None, help="libfabric tree"
    )
    parser.add_argument("--fi-tcp-iface", type=text, metavar="IFACE", help="LIBFABRIC cases: FI_TCP_IFACE (e.g. eth0)")
    parser.add_argument("--one", choices=sorted(CASES), help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.one:
        return _one(args)
    if args.out is None:
        parser.error("--out is required")
    args.out = Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.case or DEFAULT_CASES:
        results.append(_probe(args, name))
        (args.out / "nixl-probe.json").write_text(json.dumps(results, indent=1) + "\n")
    for line in table(results):
        print(line)
    return 0


def _probe(args, name: str) -> dict[str, Any]:
    """One case as its own `--one` process under --timeout: its output in OUT/nixl-probe-NAME.log, its entry (a
    failure, hang or crash is one too)."""
    case = CASES[name]
    cmd = [
        sys.executable,
        "-m",
        "serving_lab.rehearse.nixl_probe",
        "--one",
        name,
        "--sizes",
        ",".join(map(str, args.sizes)),
        "--desc-kib",
        str(args.desc_kib),
        "--repeat",
        str(args.repeat),
    ]
    log = args.out / f"nixl-probe-{name}.log"
    started = time.monotonic()
    output, code = _run_child(cmd, case_env(case, args.libfabric, tcp_iface=args.fi_tcp_iface), args.timeout)
    log.write_text(output)
    entry = parse_result(output)
    if entry is None:
        entry = {
            "case": name,
            "backend": case.backend,
            "mem": case.mem,
            "env": case.env,
            "error": "timed out" if code is None else f"exit {code} with no result: {last_line(output)}",
        }
    entry["env"] = {
        **case.env,
        **({"FI_TCP_IFACE": args.fi_tcp_iface} if case.backend == "LIBFABRIC" and args.fi_tcp_iface else {}),
    }
    entry["why"] = case.why
    entry["seconds"] = round(time.monotonic() - started, 1)
    return entry


def _run_child(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[str, int | None]:
    """(stdout + stderr, exit code); a timed-out child: what it had printed, None."""
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        return proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        output += (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return output, None


def parse_result(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line.removeprefix(RESULT_PREFIX))
    return None


def last_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


if __name__ == "__main__":
    sys.exit(main())
