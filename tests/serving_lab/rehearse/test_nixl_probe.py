"""serving_lab/rehearse/nixl_probe.py on CPU: the descriptors it asks NIXL to move, the environment each case runs
in, and the driver that runs every case in processes of its own (a case that crashes, hangs or prints no result is a
result, not the end of the run). The transfers themselves need NIXL and a GPU: they ran on an H200
(evidence/2026-12-01-h200-kv-transport/)."""

from __future__ import annotations

import json
import subprocess

import pytest

from serving_lab.rehearse import nixl_probe


def test_descriptors_cover_the_bytes_in_pieces_of_the_asked_size():
    assert nixl_probe.descs(4096, 10, 4, 0) == [(4096, 4, 0), (4100, 4, 0), (4104, 2, 0)]
    pieces = nixl_probe.descs(0, 128 * nixl_probe.MiB, 1024 * 1024, 0)
    assert len(pieces) == 128 and sum(length for _, length, _ in pieces) == 128 * nixl_probe.MiB


def test_every_case_is_ucx_or_libfabric_on_gpu_or_host_memory():
    for case in nixl_probe.CASES.values():
        assert case.backend in ("UCX", "LIBFABRIC") and case.mem in ("VRAM", "DRAM") and case.why
    assert nixl_probe.CASES["ucx-vram"].env == {"UCX_PROTO_INFO": "y"}  # UCX as PD runs it, its choices printed
    assert nixl_probe.CASES["libfabric-dram"].env["FI_PROVIDER"] == "tcp"


def test_libfabric_cases_get_the_carried_library_first_and_the_interface_asked():
    case = nixl_probe.CASES["libfabric-dram"]
    env = nixl_probe.case_env(case, "/lf", {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}, tcp_iface="eth0")
    assert env["LD_LIBRARY_PATH"] == "/lf/lib:/usr/local/nvidia/lib64"
    assert env["FI_TCP_IFACE"] == "eth0" and env["FI_PROVIDER"] == "tcp" and env["NIXL_LOG_LEVEL"] == "INFO"
    ucx = nixl_probe.case_env(nixl_probe.CASES["ucx-vram-cuda-ipc"], "/lf", {}, tcp_iface="eth0")
    assert "FI_TCP_IFACE" not in ucx and "LD_LIBRARY_PATH" not in ucx
    assert ucx["UCX_TLS"] == "cuda_ipc,cuda_copy,tcp"


def _result(case: str, **extra) -> str:
    row = {
        "mib": 32,
        "descs": 32,
        "first_ms": 80.0,
        "median_ms": 77.6,
        "min_ms": 76.0,
        "gib_per_s": 0.4,
        "wrong_bytes": 0,
    }
    entry = {"case": case, "backend": "UCX", "mem": "VRAM", "env": {}, "rows": [row], "ok": True, **extra}
    return "UCX lines\n" + nixl_probe.RESULT_PREFIX + json.dumps(entry) + "\n"


def test_the_driver_runs_each_case_apart_and_keeps_failures_as_results(tmp_path, monkeypatch, capsys):
    calls = []

    def run(cmd, env, capture_output, text, timeout, check):
        case = cmd[cmd.index("--one") + 1]
        calls.append((case, env.get("FI_TCP_IFACE")))
        if case == "ucx-vram":
            return subprocess.CompletedProcess(cmd, 0, _result(case), "")
        if case == "libfabric-dram":
            return subprocess.CompletedProcess(
                cmd, 1, "", "request to allocate mask for invalid number: Invalid argument\n"
            )
        raise subprocess.TimeoutExpired(cmd, timeout, output=b"half a line", stderr=b"")

    monkeypatch.setattr(nixl_probe.subprocess, "run", run)
    argv = ["--out", str(tmp_path), "--case", "ucx-vram", "--case", "libfabric-dram", "--case", "libfabric-vram"]
    assert nixl_probe.main([*argv, "--fi-tcp-iface", "eth0"]) == 0
    assert calls == [("ucx-vram", None), ("libfabric-dram", "eth0"), ("libfabric-vram", "eth0")]
    results = json.loads((tmp_path / "nixl-probe.json").read_text())
    assert [r["case"] for r in results] == ["ucx-vram", "libfabric-dram", "libfabric-vram"]
    assert results[0]["rows"][0]["gib_per_s"] == 0.4
    assert results[1]["error"] == "exit 1 with no result: request to allocate mask for invalid number: Invalid argument"
    assert results[1]["env"]["FI_TCP_IFACE"] == "eth0"  # what the case ran with, recorded
    assert results[2]["error"] == "timed out"
    assert (tmp_path / "nixl-probe-libfabric-vram.log").read_text() == "half a line"
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("case") and "0.40  ok" in table[1] and "timed out" in table[-1]


def test_out_is_required(capsys):
    with pytest.raises(SystemExit):
        nixl_probe.main([])
    assert "--out is required" in capsys.readouterr().err


def test_a_result_line_is_found_after_any_other_output():
    assert nixl_probe.parse_result(_result("ucx-dram"))["case"] == "ucx-dram"
    assert nixl_probe.parse_result("no result here\n") is None
    assert nixl_probe.last_line("a\n\n  b  \n\n") == "b"
