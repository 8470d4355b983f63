"""The GPU evidence of evidence/2026-12-03-h200-libfabric/: the README's results and phase figures are
the committed runs' own (consoles, worker tails, the TTFT phases JSON as it came back)."""

from __future__ import annotations

import json
import re
import tarfile

import pytest

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-12-03-h200-libfabric"
README = (EVIDENCE / "README.md").read_text()
RUNS = EVIDENCE / "runs"


def _phases() -> list[dict]:
    with tarfile.open(RUNS / "lf-full.tgz") as tar:
        member = tar.extractfile("./dev/ttft-phases-pd.json")
        assert member is not None
        return json.load(member)


def _decode(round_: dict) -> dict:
    (engine,) = [e for e in round_["engines"] if e["role"] == "decode"]
    return engine


def _row(label: str) -> list[str]:
    (line,) = [line for line in README.splitlines() if line.startswith(f"| {label} ")]
    return [cell.strip() for cell in line.strip("|").split("|")][1:3]


def test_the_gpu_memory_run_failed_where_the_readme_says():
    workers = (RUNS / "lf-cuda-workers.txt").read_text()
    assert "Memory type 1 is not supported by libfabric backend" in workers
    assert "0 NVIDIA GPUs" in workers and "NIXL_ERR_BACKEND" in workers
    console = (RUNS / "lf-cuda.log").read_text()
    assert "application RUNNING" not in console and "2 replaced" in console


def test_the_cuda_build_offers_no_hmem_on_tcp():
    text = (RUNS / "fi-hmem.txt").read_text()
    assert text.startswith("fi_getinfo: -61 (No data available)") and "FI_HMEM_CUDA_USE_GDRCOPY" in text


def test_the_host_memory_run_is_running_with_libfabric_and_its_checks():
    console = (RUNS / "lf-full.log").read_text()
    found = re.search(r"application RUNNING\s+PASS\s+(\d+) s from ray start", console)
    assert found is not None and f"RUNNING {found[1]} s from ray start" in README
    assert "OK: 11 passed, 0 failed, 1 warnings, 0 skipped" in console and "11 checks passed" in README
    assert "kv_buffer_device: None -> 'cpu'" in console and "FI_PROVIDER: 'efa' -> 'tcp'" in console


def test_both_engines_instantiated_the_libfabric_backend():
    with tarfile.open(RUNS / "lf-full.tgz") as tar:
        member = tar.extractfile("./dev/nixl-lines-pd.txt")
        assert member is not None
        lines = member.read().decode()
    engines = set(re.findall(r"Initializing NIXL worker (\S+)", lines))
    assert {e.split("-")[0] for e in engines} == {"prefill", "decode"}
    assert lines.count("Backend LIBFABRIC was instantiated") >= 2 and "Backend UCX" not in lines


def test_every_request_of_both_rounds_moved_its_kv_cache_through_nixl():
    for round_ in _phases():
        decode = _decode(round_)
        assert round_["requests"] == 8 and decode["nixl_transfers"] == 8 and round_["complete"]


@pytest.mark.parametrize(
    ("label", "key"), [("client TTFT median", "client_ttft_median_s"), ("outside the engines", "outside_engines_s")]
)
def test_the_client_rows_are_the_runs(label, key):
    assert _row(label) == [f"{round_[key] * 1000:.1f} ms" for round_ in _phases()]


def test_the_nixl_row_is_the_runs_transfer_time_and_buckets():
    for cell, round_ in zip(_row("of it the NIXL transfer"), _phases(), strict=True):
        decode = _decode(round_)
        assert cell.startswith(f"{decode['nixl_xfer'] * 1000:.1f} ms (")
        counts = [int(n) for n in re.findall(r"(\d+) in ", cell)]
        assert counts == list(decode["nixl_xfer_buckets"].values())


def test_the_rate_follows_from_the_bytes_per_token_and_the_fastest_bucket():
    console = (RUNS / "lf-full.log").read_text()
    cache = re.search(r"kv_cache_memory_bytes: None -> (\d+)", console)
    tokens = re.search(r"KV cache 21.06 GiB \(fixed\), ([\d,]+) tokens", console)
    assert cache is not None and tokens is not None
    per_token = int(cache[1]) / int(tokens[1].replace(",", ""))
    assert round(per_token / 1024) == 128 and "128 KiB of KV per token" in README
    mib = per_token * 750 / 2**20
    assert round(mib) == 94
    low, high = mib / 1024 / 0.100, mib / 1024 / 0.050
    assert f"{low:.1f}-{high:.1f} GiB/s per transfer one at a time" in README
