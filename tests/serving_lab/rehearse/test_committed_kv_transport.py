"""The GPU evidence of evidence/2026-12-01-h200-kv-transport/: the README's figures are the committed runs' own
(the NIXL probe's JSON, the TTFT phases of the warm UCX rehearsal, the consoles and worker tails as they came back),
and what it says did not run did not."""

from __future__ import annotations

import json
import re
import tarfile

import pytest

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-01-h200-kv-transport"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"


def _probe(name: str) -> dict[str, dict]:
    return {entry["case"]: entry for entry in json.loads((EVIDENCE / name).read_text())}


def _rows(entry: dict) -> dict[int, dict]:
    return {row["mib"]: row for row in entry["rows"]}


def _member(archive: str, name: str) -> str:
    with tarfile.open(RUNS / archive) as tar:
        member = tar.extractfile(name)
        assert member is not None, f"{archive}: no {name}"
        return member.read().decode(errors="replace")


def test_libfabric_moved_host_memory_at_the_readmes_rates_and_every_byte_was_right():
    entry = _probe("nixl-probe-libfabric.json")["libfabric-dram"]
    rows = _rows(entry)
    assert entry["ok"] and all(row["wrong_bytes"] == 0 for row in rows.values())
    assert entry["env"]["FI_PROVIDER"] == "tcp" and entry["env"]["FI_TCP_IFACE"] == "eth0"
    assert (rows[32]["gib_per_s"], rows[128]["gib_per_s"]) == (3.07, 3.599)
    assert "**3.07 / 3.60 GiB/s**" in README
    assert f"{rows[32]['median_ms']:.2f} / {rows[128]['median_ms']:.2f} ms" in README
    assert f"first {rows[32]['first_ms']:.2f} / {rows[128]['first_ms']:.2f} ms" in README


def test_libfabric_registered_no_cuda_memory_and_the_logs_say_why():
    assert (
        _probe("nixl-probe-libfabric.json")["libfabric-vram"]["error"]
        == "initiator: nixlNotFoundError: NIXL_ERR_NOT_FOUND"
    )
    log = _member("nixl-probe-call17.tgz", "probe/nixl-probe-libfabric-vram.log")
    for line in (
        "registerMem: no available backends for mem type 'VRAM_SEG'",
        "0 NVIDIA GPUs",
        "System runtime: SYSTEM",
        "No provider found with FI_HMEM capability for rail 0",
        "Created 1 rails using provider=tcp",
    ):
        assert line in log and line in README, line


def test_the_carried_libnuma_made_the_backend_exit_and_its_absence_let_it_start():
    trace = _member("nixl-probe-call13.tgz", "probe/nixl-probe-libfabric-dram.log")
    assert "Discovered backend plugin: LIBFABRIC" in trace
    assert trace.strip().splitlines()[-1] == "request to allocate mask for invalid number: Invalid argument"
    assert (RUNS / "lf-pd-workers.txt").read_text().count("request to allocate mask for invalid number") == 4
    assert "4 times: the lf-pd run" in README
    assert "libnuma1 2.0.19" in (RUNS / "libfabric-call10.txt").read_text()  # what that run carried
    names = [
        line.split()[0]
        for line in (ROOT / "serving_lab" / "pins" / "libfabric.debs").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert "libnuma1" not in names  # what the README says was taken out


def test_loopback_failed_the_rail():
    log = _member("nixl-probe-call16.tgz", "probe/nixl-probe-libfabric-dram.log")
    assert "socket listen failed" in log and "fi_enable failed for rail 0: Bad file descriptor" in log
    assert "read string var iface=lo" in log


def test_the_host_and_the_carried_libfabrics_symbol_versions():
    host = (RUNS / "host.txt").read_text()
    assert (
        "/lib/x86_64-linux-gnu/libfabric.so.1: FABRIC_1.0 FABRIC_1.1 FABRIC_1.2 FABRIC_1.3 FABRIC_1.4 FABRIC_1.5 FABRIC_1.6 \n"
        in host
    )
    assert "ldd (Ubuntu GLIBC 2.39" in host and "NVIDIA H200, 143771 MiB, 580.159.04" in host
    carried = (RUNS / "libfabric-call10.txt").read_text()
    assert (
        "versions: FABRIC_1.0 FABRIC_1.1 FABRIC_1.2 FABRIC_1.3 FABRIC_1.4 FABRIC_1.5 FABRIC_1.6 FABRIC_1.7 FABRIC_1.8"
        in carried
    )
    assert "libfabric.so.1 => /tmp/rehearsal-site/libfabric/lib/libfabric.so.1" in carried
    assert "version `FABRIC_1.7' not found" in carried  # the host's own, the failure of the issue
    assert "fi_getinfo: -61 (No data available)" in carried  # tcp asked for FI_HMEM
    for provider in ("provider: tcp", "provider: shm", "provider: sockets"):
        assert provider in carried


@pytest.mark.parametrize(
    ("case", "cells"),
    [
        ("ucx-vram", "**0.40 / 0.41 GiB/s** (77.61 / 307.13 ms)"),
        ("ucx-vram-cuda-ipc", "0.44 / 0.43 GiB/s (71.74 / 292.55 ms)"),
        ("ucx-vram-no-ipc", "0.41 / 0.41 GiB/s (76.23 / 304.38 ms)"),
        ("ucx-dram", "3.17 / 3.99 GiB/s (9.86 / 31.34 ms)"),
    ],
)
def test_the_ucx_rows_are_the_probes(case, cells):
    entry = _probe("nixl-probe-ucx.json")[case]
    rows = _rows(entry)
    assert entry["ok"]
    bold = cells.startswith("**")
    expected = f"{rows[32]['gib_per_s']:.2f} / {rows[128]['gib_per_s']:.2f} GiB/s"
    assert (f"**{expected}**" if bold else expected) in cells
    assert f"({rows[32]['median_ms']:.2f} / {rows[128]['median_ms']:.2f} ms)" in cells
    assert cells in README


def test_ucx_emulated_gpu_reads_over_tcp_and_never_offered_cuda_ipc():
    for case in ("ucx-vram", "ucx-vram-cuda-ipc", "ucx-vram-no-ipc"):
        log = _member("nixl-probe-call12.tgz", f"probe/nixl-probe-{case}.log")
        lines = log.splitlines()
        index = next(
            i for i, line in enumerate(lines) if "remote memory read by ucp_get*(multi) into cuda/GPU0" in line
        )
        assert "software emulation" in lines[index + 2] and "tcp/lo" in lines[index + 2], case
        assert not [line for line in lines if "cuda_ipc" in line and "NIXL_PROBE_RESULT" not in line], case


def test_the_pd_phase_figures_are_the_warm_runs():
    one, sixteen = json.loads((EVIDENCE / "ttft-phases-ucx.json").read_text())
    assert (one["concurrency"], sixteen["concurrency"]) == (1, 16) and one["complete"] and sixteen["complete"]
    decode = next(e for e in one["engines"] if e["role"] == "decode")
    prefill = next(e for e in one["engines"] if e["role"] == "prefill")
    assert one["client_ttft_median_s"] == 0.4065 and "client TTFT median **406.5 ms**" in README
    assert decode["nixl_xfer"] == 0.225 and decode["ttft"] == 0.225 and "the NIXL transfer **225 ms**" in README
    assert decode["nixl_xfer_buckets"] == {"0.1-0.2": 3, "0.2-0.3": 9}
    assert "3 in the 0.1-0.2 s bucket, 9 in 0.2-0.3 s" in README
    assert decode["nixl_descs_buckets"] == {"30-50": 12} and decode["nixl_bytes_buckets"] == {
        "3.35544e+07-1.34218e+08": 12
    }
    assert f"prefill engine TTFT {prefill['ttft'] * 1000:.1f} ms" in README
    busy = next(e for e in sixteen["engines"] if e["role"] == "decode")
    assert sixteen["client_ttft_median_s"] == 3.5196 and "client TTFT median **3,519.6 ms**" in README
    assert round(busy["nixl_xfer"] * 1000) == 2783 and busy["nixl_xfer_buckets"]["1-5"] == 11
    report = {c["name"]: c for c in json.loads((EVIDENCE / "report-ucx-warm.json").read_text())["checks"]}
    assert report["application RUNNING"]["detail"] == "195 s from ray start" and "RUNNING **195 s**" in README


def test_the_computed_bytes_per_request_fit_what_was_measured():
    descriptors, page = 8 * (2 + 3), 2_162_688
    assert descriptors == 40 and descriptors * page == 86_507_520
    assert f"{descriptors * page / 2**20:.1f} MiB" == "82.5 MiB" and "**86,507,520 bytes, 82.5 MiB**" in README
    workers = (RUNS / "ucx-pd-warm-workers.txt").read_text()
    assert "num_regions=8" in workers and "block_len_per_layer={2162688}" in workers
    assert f"{descriptors * page / 2**30 / 0.225:.2f} GiB/s" == "0.36 GiB/s" and "**0.36 GiB/s**" in README
    assert (
        f"at least {descriptors * page / 3.125e9 * 1000:.0f} ms" == "at least 28 ms" and "**at least 28 ms**" in README
    )


def test_what_did_not_run_did_not_reach_running():
    lf = (RUNS / "lf-pd.log").read_text()
    assert "application RUNNING" in lf and "FAIL" in lf and "llm RUNNING" not in lf
    cold = (RUNS / "ucx-pd-cold.log").read_text()
    assert "not RUNNING within 420 s" in cold
    assert "**PD with LIBFABRIC has not run**" in README


def test_the_commands_are_the_session_scripts():
    script = (EVIDENCE / "session.sh").read_text()
    for sub in ("carry)", "host)", "libfabric)", "probe)", "rehearse)"):
        assert f"  {sub}" in script
    for name, limit in (("ucx-pd", 480), ("lf-pd", 460), ("ucx-pd2", 400)):
        assert re.search(rf"bash \$S rehearse {name} {limit} --stage dev --mode pd --share-gpus", README)
    assert "held_s" in README and "1,652 s" in README
