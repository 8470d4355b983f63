"""The GPU evidence of evidence/2026-12-05-h100-compiled-graphs/: torch.compile's 1.97 GiB peak was its first
compile's, the stage's fixed KV cache is the warm start's own fit figure, and the README's tables are the runs' own
figures."""

from __future__ import annotations

import re
import statistics
import tarfile

import pytest

from config import load_stage_file
from serving_lab.bench import goodput, intervals
from serving_lab.rehearse import engine_memory, kv_profile, oracle

from ...helpers import ROOT
from .archives import answers, archived

EVIDENCE = ROOT / "evidence" / "2026-12-05-h100-compiled-graphs"
RUNS = EVIDENCE / "runs"
README = (EVIDENCE / "README.md").read_text()
OBJECTIVES = goodput.Objectives.of_seconds(2.0, 0.1)
ARMS = {"today": "today (`decode_only`)", "vllm-default@512": "vllm-default@512, cold"}
ARMS["vllm-default@512.start2"] = "vllm-default@512, warm"
RUN_COLUMNS = {"co-today": 2, "co-vd": 3, "pd-vd2": 4}  # the chat table's column of each run


def _log(arm: str) -> str:
    with tarfile.open(RUNS / "arms3.tgz") as tar:
        member = tar.extractfile(f"./dev/graph-arms/{arm}.log")
        assert member is not None
        return member.read().decode()


def _cells(first: str, table_start: str = "") -> list[str]:
    text = README[README.index(table_start) :] if table_start else README
    line = next(line for line in text.splitlines() if line.startswith(f"| {first} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_warm_starts_fit_figure_is_the_stages_fixed_kv_cache():
    fit = kv_profile.fit_bytes(_log("vllm-default@512.start2"))
    assert fit == 2455861324
    for stage in ("dev", "prod"):
        engine = load_stage_file(f"config/{stage}.yaml").serving.engine
        assert engine.extra_args["kv_cache_memory_bytes"] == fit and engine.cuda_graphs is None
        assert engine.extra_args["max_cudagraph_capture_size"] == 512


@pytest.mark.parametrize("arm", list(ARMS))
def test_the_arms_peak_kv_tokens_fit_and_start_are_the_runs_own(arm):
    text, cells = _log(arm), _cells(ARMS[arm])
    peak = text.split(" GiB for peak activation")[0].rsplit(" ", 1)[-1]
    row = {r["arm"]: r for r in archived(RUNS / "arms3.tgz", "graph-arms/arms.json")["arms"]}[arm]
    assert cells[1].strip("*") == f"{peak} GiB"
    assert cells[2].strip("*") == f"{row['vllm']['kv_cache_tokens']:,} ({kv_profile.fit_bytes(text):,} B)"
    assert cells[4].strip("*") == f"{row['start_seconds']:.1f} s"
    assert cells[5].strip("*").startswith(f"{row['medians']['first_token_256'] * 1000:.1f} ms")


def test_the_compiles_peak_is_the_first_starts_only():
    peaks = {arm: _log(arm).split(" GiB for peak activation")[0].rsplit(" ", 1)[-1] for arm in ARMS}
    assert peaks == {"today": "0.25", "vllm-default@512": "1.97", "vllm-default@512.start2": "0.28"}
    assert engine_memory.figures(_log("vllm-default@512"))["compile_seconds"] == 15.85


@pytest.mark.parametrize("streams", [1, 4, 16])
@pytest.mark.parametrize("run", list(RUN_COLUMNS))
def test_the_chat_table_is_each_runs_records(run, streams):
    level = f"chat-c{streams}"
    found = intervals.figures(level, intervals.levels(RUNS / f"{run}-records.tgz")[level], OBJECTIVES)
    assert found.ttft is not None and found.itl is not None and found.interval is not None
    start = f"| {streams} | TTFT p50 |"
    lines = README[README.index(start) :].splitlines()[:3]
    ttft, itl, good = ([c.strip() for c in line.strip("|").split("|")][RUN_COLUMNS[run]] for line in lines)
    assert ttft.startswith(f"{found.ttft.ms:.1f} ms ({found.ttft.low:.1f}-{found.ttft.high:.1f})")
    places = 2 if found.itl.high < 10 else 1
    assert itl.startswith(f"{found.itl.ms:.{places}f} ms ({found.itl.low:.{places}f}-{found.itl.high:.{places}f})")
    assert good.startswith(f"{found.interval.per_s:.2f}/s")


@pytest.mark.parametrize(
    ("label", "figure"),
    [
        ("client TTFT", "client_ttft_s"),
        ("prefill", "prefill_compute_s"),
        ("outside the engines", "outside_engines_s"),
    ],
)
@pytest.mark.parametrize(("run", "mode"), [("co-today", "colocated"), ("co-vd", "colocated"), ("pd-vd2", "pd")])
def test_the_phase_table_is_the_medians_of_each_requests_spans(label, figure, run, mode):
    rounds = archived(RUNS / f"{run}.tgz", f"ttft-phases-{mode}.json")
    for found in rounds:
        rows = found["per_request"]["rows"]
        median = statistics.median(r[figure] for r in rows)  # of the rows' rounded figures: within 10 us
        assert found["per_request"]["medians"][figure] == pytest.approx(median, abs=1e-5)
        assert {r["prompt_tokens"] for r in rows} <= set(range(720, 727))
    cell = _cells(label, "| phase | colocated, today")[RUN_COLUMNS[run] - 1]
    shown = [float(x) for x in re.findall(r"\d+\.\d(?![\d.]*x)", cell)]  # "42.7 ms (4.2x) / 145.2": not the multiple
    assert shown == [round(found["per_request"]["medians"][figure] * 1000, 1) for found in rounds]


def test_pd_compiled_answers_as_either_colocated_engine_within_the_noise():
    pd = answers(RUNS / "pd-vd2.tgz", "pd")
    for run in ("co-vd", "co-today"):
        found = oracle.compare(pd, answers(RUNS / f"{run}.tgz", "colocated"))
        assert (found.ok, len(found.divergences), sum(d.within_noise for d in found.divergences)) == (True, 22, 22)


def test_the_first_pd_run_failed_only_its_rate_check_and_the_bytes_were_all_accounted():
    report = archived(RUNS / "pd-vd.tgz", "report-pd.json")
    failed = [c["name"] for c in report["checks"] if c["status"] == "fail"]
    assert failed == ["KV transfer rate"]
    accounted = [c for c in report["checks"] if c["name"].startswith("KV bytes accounted")]
    assert len(accounted) == 2 and all(c["status"] == "pass" for c in accounted)
