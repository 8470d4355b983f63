"""The GPU evidence of evidence/2026-12-02-h200-cuda-ipc/: the README's figures are the committed runs' own (the
NIXL probes' JSON and logs, the PD consoles, plans and worker tails as they came back), and the override the rehearsal
now sets is the one that ran."""

from __future__ import annotations

import gzip
import json

import pytest

from serving_lab.rehearse import overrides

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-02-h200-cuda-ipc"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"


def _rows(folder: str) -> dict[int, dict]:
    (entry,) = json.loads((RUNS / folder / "nixl-probe.json").read_text())
    assert entry["ok"] and entry["case"] == "ucx-vram"
    assert all(row["wrong_bytes"] == 0 for row in entry["rows"])
    return {row["mib"]: row for row in entry["rows"]}


@pytest.mark.parametrize(
    ("folder", "cell"),
    [
        ("probe-before", "**0.51 / 0.47 GiB/s** (61.48 / 264.65 ms)"),
        ("probe-after", "**79.98 / 105.29 GiB/s** (0.39 / 1.19 ms"),
    ],
)
def test_the_probe_rows_are_the_probes(folder, cell):
    rows = _rows(folder)
    assert f"**{rows[32]['gib_per_s']:.2f} / {rows[128]['gib_per_s']:.2f} GiB/s**" in cell
    assert f"({rows[32]['median_ms']:.2f} / {rows[128]['median_ms']:.2f} ms" in cell
    assert cell in README


def test_ucx_read_gpu_memory_by_emulation_before_and_by_cuda_ipc_after():
    def read_path(folder: str) -> str:
        lines = (RUNS / folder / "nixl-probe-ucx-vram.log").read_text().splitlines()
        index = max(i for i, line in enumerate(lines) if "remote memory read by ucp_get*(multi) into cuda/GPU0" in line)
        return lines[index + 2]

    assert "software emulation" in read_path("probe-before") and "tcp/lo" in read_path("probe-before")
    assert "zero-copy" in read_path("probe-after") and "cuda_ipc/cuda" in read_path("probe-after")


def test_the_debug_log_says_why_ucx_turned_cuda_ipc_reads_off():
    with gzip.open(RUNS / "probe-ucx-debug" / "nixl-probe-ucx-vram-cuda-ipc.log.gz", "rt") as log:
        text = log.read()
    line = "cuda-ipc get zcopy disabled as no nvlinks detected"
    assert line in text and line in README


def test_the_pd_run_ran_the_override_the_rehearsal_now_sets_and_its_figures_are_the_consoles():
    plan = json.loads((RUNS / "ipc-pd-plan.json").read_text())
    assert plan["env"][overrides.UCX_CUDA_IPC_READS] == "y"
    console = (RUNS / "ipc-pd.log").read_text()
    assert "[  271 s] llm RUNNING" in console and "RUNNING after **271 s**" in README
    assert "client TTFT median 168.8 ms over 12 streams, 1 at a time" in console
    assert "client TTFT median **168.8 ms**" in README
    assert "83886080 bytes per NIXL transfer, 40 descriptors per NIXL transfer): ttft 16.2 ms" in console
    assert "nixl_xfer 2.5 ms" in console and "nixl_xfer per bucket (transfers): 0-0.005: 12" in console
    assert "the NIXL transfer **2.5 ms** (all 12 transfers in the 0-5 ms bucket" in README
    # under 5 ms for 83,886,080 bytes: at least this rate, as the README states it
    assert f"**at least {83886080 / 0.005 / 2**30:.1f} GiB/s**" in README


def test_the_libfabric_run_loaded_the_plugin_and_died_on_the_host_buffer():
    plan = json.loads((RUNS / "lf-pd-plan.json").read_text())
    kv = plan["serve_config"]["applications"][0]["args"]["prefill_config"]["engine_kwargs"]["kv_transfer_config"]
    assert kv["kv_buffer_device"] == "cpu" and kv["kv_connector_extra_config"]["backends"] == ["LIBFABRIC"]
    workers = (RUNS / "lf-pd-workers.txt").read_text()
    for line in ("Created 1 rails using provider=tcp", "in initialize_host_xfer_buffer"):
        assert line in workers, line
    assert "AttributeError: 'list' object has no attribute 'shape'" in workers
    assert "not RUNNING within 440 s" in (RUNS / "lf-pd.log").read_text() and "**no KV moved**" in README
