"""Goodput counted exactly on records written by hand (records.py): which requests are good, the duration
they span, the objectives' sources; the runs ranked by it; and a results folder saved before goodput (as
`ops rehearse --bench` wrote them) given its goodput from the records beside it."""

from __future__ import annotations

import json

import pytest

from config import CONFIG_DIR, load_stages
from ops.__main__ import main
from serving_lab.bench import aiperf, goodput, report, results
from serving_lab.bench.goodput import Objectives

from . import records
from .records import Request
from .runs import make_run

OBJECTIVES = Objectives(ttft_ms=2000.0, itl_ms=100.0)
# Each request's verdict under OBJECTIVES, and why.
CRAFTED = [
    (Request(0, 900, ttft_ms=1999.999, itl_ms=50), True),  # TTFT just under
    (Request(10, 950, ttft_ms=2000.001, itl_ms=50), False),  # TTFT just over
    (Request(20, 960, ttft_ms=2000.0, itl_ms=100.0), True),  # both exactly at the objective: <=
    (Request(30, 970, ttft_ms=100, itl_ms=100.001), False),  # ITL just over
    (Request(40, 980, ttft_ms=100, itl_ms=99.999), True),  # ITL just under
    (Request(50, 990, ttft_ms=None, itl_ms=None, error="boom"), False),  # failed
    (Request(60, 1500, ttft_ms=10, itl_ms=10, error="stream cut"), False),  # failed after fast tokens
    (Request(70, 400, ttft_ms=300, itl_ms=None, output_tokens=1), True),  # one token: no gap to be late
    (Request(80, 400, ttft_ms=300, itl_ms=None, output_tokens=5), False),  # ITL missing otherwise: no pass
]
WARMUP = [Request(-5000, -4000, ttft_ms=10, itl_ms=10, phase="warmup")]  # before: not measured, not spanned


def _measured(folder):
    return aiperf.requests(records.write(folder, WARMUP + [r for r, _ in CRAFTED]))


def test_a_request_is_good_when_it_succeeded_within_both_objectives(tmp_path):
    measured = _measured(tmp_path)
    assert [goodput.is_good(r, OBJECTIVES) for r in measured] == [good for _, good in CRAFTED]


def test_goodput_is_the_good_requests_per_second_of_the_first_start_to_the_last_end(tmp_path):
    found = goodput.count(_measured(tmp_path), OBJECTIVES)
    # 4 good of 9 measured (the warm-up left out); from the first start (0 ms) to the last end (the failed
    # request's, 1500 ms): failed requests are sent load and are spanned too.
    assert (found.good, found.requests, found.duration_s) == (4, 9, 1.5)
    assert found.per_s == 4 / 1.5 and found.attainment == 4 / 9
    assert (found.ttft_slo_ms, found.itl_slo_ms, found.aiperf_per_s) == (2000.0, 100.0, None)


def test_a_level_without_records_has_no_goodput(tmp_path):
    assert goodput.of_folder(tmp_path, OBJECTIVES) is None
    assert goodput.count([], OBJECTIVES) is None


def test_aipers_own_figure_is_kept_only_when_it_was_asked_for_the_same_objectives(tmp_path):
    same = {"time_to_first_token": 2000.0, "inter_token_latency": 100.0}
    requests = [r for r, _ in CRAFTED]
    asked = goodput.of_folder(records.write(tmp_path / "a", requests, same, aiperf_goodput=2.5), OBJECTIVES)
    other = {"time_to_first_token": 500.0, "inter_token_latency": 100.0}
    unasked = goodput.of_folder(records.write(tmp_path / "b", requests, other, aiperf_goodput=2.5), OBJECTIVES)
    assert (asked.aiperf_per_s, unasked.aiperf_per_s) == (2.5, None)
    assert asked.per_s == unasked.per_s == 4 / 1.5  # ours never reads aiperf's


def test_the_objectives_are_the_stages_ttft_alarm_and_a_tenth_of_a_second_by_default():
    dev, prod = (load_stages(CONFIG_DIR, only=stage)[0] for stage in ("dev", "prod"))
    assert Objectives.of_stage(dev) == Objectives(2000.0, 100.0)  # observability.ttft_p99_slo_seconds 2.0
    assert Objectives.of_stage(prod) == Objectives(1000.0, 100.0)  # 1.0 in prod
    tighter = dev.model_copy(
        update={
            "benchmark": dev.benchmark.model_copy(
                update={"slo": dev.benchmark.slo.model_copy(update={"ttft_seconds": 0.5})}
            )
        }
    )
    assert Objectives.of_stage(tighter) == Objectives(500.0, 100.0)
    assert Objectives.of_stage(tighter, ttft_seconds=1.1, itl_seconds=0.05) == Objectives(1100.0, 50.0)


def test_objectives_compare_equal_across_seconds_and_milliseconds():
    # 1.1 * 1000 is 1100.0000000000002 in floats: rounded to a ns, a run's recorded 1.1 s matches 1100 ms.
    assert Objectives.of_seconds(1.1, 0.07) == Objectives(1100.0, 70.0)
    assert Objectives.of_settings({"slo": Objectives(1100.0, 70.0).settings()}) == Objectives(1100.0, 70.0)
    assert Objectives.of_settings({}) is None and Objectives.of_settings({"slo": {"ttft_seconds": True}}) is None


# --- ranking ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, ranked",
    [
        ([("a", 1.0), ("b", 3.0), ("c", 2.0)], [("1", "b"), ("2", "c"), ("3", "a")]),
        # within 5 % of the best of a rank: the same rank, called a tie; the next rank counts the places
        ([("a", 3.0), ("b", 2.9), ("c", 1.0)], [("1 (tie)", "a"), ("1 (tie)", "b"), ("3", "c")]),
        # 0: no request met both objectives at any level: not ranked; None: no goodput: n/a, last
        ([("a", None), ("b", 0.0), ("c", 0.5)], [("1", "c"), ("-", "b"), ("n/a", "a")]),
        ([("a", 0.0), ("b", 0.0)], [("-", "a"), ("-", "b")]),
    ],
)
def test_ranking_orders_by_best_goodput_ties_within_5_percent_and_leaves_zero_unranked(values, ranked):
    assert [(rank, label) for rank, label, _ in report.ranking(values)] == ranked


def _with_goodput(run, per_level: dict, objectives=OBJECTIVES):
    """`run` with goodput {profile: {concurrency: good requests of 5, over 10 s}}."""
    profiles = []
    for profile in run.profiles:
        levels = []
        for level in profile.levels:
            good = per_level[profile.name][level.concurrency]
            g = results.Goodput(
                ttft_slo_ms=objectives.ttft_ms,
                itl_slo_ms=objectives.itl_ms,
                good=good,
                requests=5,
                duration_s=10.0,
                per_s=good / 10.0,
            )
            levels.append(level.model_copy(update={"goodput": g}))
        profiles.append(profile.model_copy(update={"levels": levels}))
    settings = {**run.settings, "slo": objectives.settings()}
    return run.model_copy(update={"profiles": profiles, "settings": settings})


LEVELS = {"chat": {1: (100, 20, 900), 16: (150, 22, 1000)}, "long": {1: (300, 25, 1200), 16: (700, 30, 1500)}}


def _ranking_rows(text: str) -> list[list[str]]:
    section = text.split("## Goodput")[1].split("\n## ")[0]
    table = [line for line in section.splitlines() if line.startswith("|")][2:]  # past the header and rule
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table]


def test_compare_ranks_the_runs_by_their_best_goodput_per_profile(tmp_path):
    pd = _with_goodput(make_run("pd", LEVELS), {"chat": {1: 2, 16: 5}, "long": {1: 0, 16: 0}})
    colocated = _with_goodput(make_run("colocated", LEVELS), {"chat": {1: 3, 16: 4}, "long": {1: 1, 16: 0}})
    text = report.compare(pd, colocated, tmp_path).read_text()
    assert "met both objectives (TTFT <= 2 s and ITL <= 100 ms)" in text
    assert _ranking_rows(text) == [
        ["chat", "1", "pd", "0.50", "concurrency 16", "5 / 5", "100%"],
        ["chat", "2", "colocated", "0.40", "concurrency 16", "4 / 5", "80%"],
        ["long", "1", "colocated", "0.10", "concurrency 1", "1 / 5", "20%"],
        ["long", "-", "pd", "0.00", "concurrency 1", "0 / 5", "0%"],  # met them nowhere: not ranked
    ]
    chat = text.split("## chat")[1].split("## long")[0]
    assert "- goodput: **pd** ahead at concurrency 16; **colocated** ahead at concurrency 1 " in chat
    assert "| 16 | pd | 150 |" in chat and chat.count(" 0.50 (5/5) |") == 1  # goodput column per level
    long = text.split("## long")[1]
    assert "- goodput: **colocated** ahead at concurrency 1 " in long  # pd 0 vs 0.1: ahead; 0 vs 0 at 16: tie
    # the existing figures are still there
    assert "- TTFT p50: within 5% at every level" in chat and "| concurrency | run | TTFT p50 |" in chat


def test_goodput_under_other_objectives_is_not_ranked(tmp_path):
    pd = _with_goodput(make_run("pd", LEVELS), {"chat": {1: 2, 16: 5}, "long": {1: 1, 16: 1}})
    other = _with_goodput(
        make_run("colocated", LEVELS), {"chat": {1: 5, 16: 5}, "long": {1: 5, 16: 5}}, Objectives(500.0, 100.0)
    )
    rows = _ranking_rows(report.compare(pd, other, tmp_path).read_text())  # pd's objectives: the report's
    assert ["chat", "n/a", "colocated", "n/a", "", "", ""] in rows and ["chat", "1", "pd"] == rows[0][:3]


def test_runs_without_goodput_make_the_report_they_made_before(tmp_path):
    text = report.compare(make_run("pd", LEVELS), make_run("colocated", LEVELS), tmp_path).read_text()
    assert "Goodput" not in text and "goodput" not in text


# --- a results folder saved before goodput: counted from the records beside it -------------------------


def _saved_before_goodput(folder, label, good_ttft_ms):
    """A run as `ops bench`/`ops rehearse --bench` saved it before goodput: <time>-<label>.json without any,
    and its aiperf artifacts in <time>-<label>/chat-c1/ and chat-c16/."""
    run = make_run(label, {"chat": {1: (100, 20, 900), 16: (150, 22, 1000)}})
    run = run.model_copy(update={"created_at": "2026-12-01T10:00:00+00:00"})
    path = run.save(folder / f"20261201T100000Z-{label}.json")
    for concurrency, ttft in ((1, good_ttft_ms), (16, 2500.0)):  # at 16, every TTFT over 2 s
        requests = [Request(i * 100, i * 100 + 1000, ttft_ms=ttft, itl_ms=50) for i in range(10)]
        records.write(path.with_suffix("") / f"chat-c{concurrency}", requests)  # spans 1.9 s
    return path


def test_bench_goodput_counts_a_saved_runs_goodput_from_its_records(tmp_path, capsys):
    pd = _saved_before_goodput(tmp_path / "runs", "pd", good_ttft_ms=500.0)
    colocated = _saved_before_goodput(tmp_path / "runs", "colocated", good_ttft_ms=2100.0)
    out = tmp_path / "goodput"
    assert main(["bench", "--goodput", str(pd), str(colocated), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    # dev.yaml (the runs' stage) gives the objectives: TTFT 2 s, ITL 0.1 s
    assert "goodput objectives TTFT <= 2 s and ITL <= 100 ms (stage file " in captured.err
    assert "| chat | 1 | pd | 5.26 | concurrency 1 | 10 / 10 | 100% |" in captured.out  # 10 / 1.9 s
    assert "| chat | - | colocated | 0.00 | concurrency 1 | 0 / 10 | 0% |" in captured.out
    assert "| pd | chat | concurrency 16 | 0.00 | 0.00-0.00 (10 requests) | 0 / 10 | 0% | 1.9 | - |" in captured.out
    saved = results.load(out / pd.name)
    assert saved.profile("chat").levels[0].goodput.good == 10 and saved.settings["slo"] == {
        "ttft_seconds": 2.0,
        "itl_seconds": 0.1,
    }
    assert (out / "goodput.md").read_text() == captured.out


def test_bench_compare_ranks_saved_runs_by_the_goodput_of_their_records(tmp_path, capsys):
    pd = _saved_before_goodput(tmp_path / "runs", "pd", good_ttft_ms=2100.0)
    colocated = _saved_before_goodput(tmp_path / "runs", "colocated", good_ttft_ms=500.0)
    out = tmp_path / "report"
    assert main(["bench", "--compare", str(pd), str(colocated), "--out", str(out), "--slo-ttft", "3"]) == 0
    assert "goodput objectives TTFT <= 3 s and ITL <= 100 ms (--slo-ttft/--slo-itl over" in capsys.readouterr().err
    rows = _ranking_rows((out / "report.md").read_text())
    # under 3 s every request is good at both levels, in both runs: equal, a tie at concurrency 1
    assert [row[:5] for row in rows] == [
        ["chat", "1 (tie)", "pd", "5.26", "concurrency 1"],
        ["chat", "1 (tie)", "colocated", "5.26", "concurrency 1"],
    ]


def test_levels_without_records_keep_a_goodput_saved_under_the_same_objectives(tmp_path, capsys):
    path = _saved_before_goodput(tmp_path, "pd", good_ttft_ms=500.0)
    run, missing = goodput.recount(results.load(path), path, OBJECTIVES)
    (path.with_suffix("") / "chat-c16" / aiperf.RECORDS).unlink()
    saved = run.save(path)
    again, missing = goodput.recount(results.load(saved), saved, OBJECTIVES)
    assert missing == ["chat-c16"] and again.profile("chat").levels[1].goodput.requests == 10
    other, _ = goodput.recount(results.load(saved), saved, Objectives(3000.0, 100.0))
    assert other.profile("chat").levels[1].goodput is None  # counted under other objectives: n/a


# --- the stage file's objectives and rates: refused in one line naming the file and the field ---------------

from config import ConfigError

from ...helpers import merge, stage_data, write_stage

PROFILE = {"name": "chat", "input_tokens": 64, "output_tokens": 16, "concurrency": [1]}


@pytest.mark.parametrize(
    "benchmark, field, problem",
    [
        ({"slo": {"itl_seconds": 0}}, "benchmark.slo.itl_seconds", "Input should be greater than 0 (got 0)"),
        ({"slo": {"ttft_seconds": -1}}, "benchmark.slo.ttft_seconds", "Input should be greater than 0 (got -1)"),
        ({"slo": {"ttft_seconds": "2s"}}, "benchmark.slo.ttft_seconds", "expected number, got str '2s'"),
        ({"slo": {"itl_seconds": 61}}, "benchmark.slo.itl_seconds", "Input should be less than or equal to 60"),
        ({"slo": {"itl_ms": 50}}, "benchmark.slo.itl_ms", "unknown key (allowed: itl_seconds, ttft_seconds)"),
        (
            {"profiles": [{**PROFILE, "request_rates": [0]}]},
            "benchmark.profiles[0].request_rates[0]",
            "Input should be greater than or equal to 0.01 (got 0)",
        ),
        (
            {"profiles": [{**PROFILE, "request_rates": [2, 1]}]},
            "benchmark.profiles[0].request_rates",
            "list each level once, in ascending order (e.g. [0.5, 1, 2, 4])",
        ),
        (
            {"profiles": [{**PROFILE, "request_rates": [1, float("inf")]}]},
            "benchmark.profiles[0].request_rates[1]",
            "Input should be less than or equal to 1000 (got inf)",
        ),
        (
            {"profiles": [{**PROFILE, "request_rates": "1,2"}]},
            "benchmark.profiles[0].request_rates",
            "expected list, got str '1,2'",
        ),
    ],
)
def test_bad_objectives_and_rates_in_the_stage_file_are_one_line_naming_file_and_field(
    benchmark, field, problem, tmp_path
):
    path = write_stage(tmp_path, merge(stage_data("dev"), {"benchmark": benchmark}))
    with pytest.raises(ConfigError) as info:
        load_stages(tmp_path, only="dev")
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: {field}: {problem}"), message


def test_the_committed_stages_need_no_new_field():
    for stage in ("dev", "prod"):
        (cfg,) = load_stages(CONFIG_DIR, only=stage)
        assert cfg.benchmark.slo.ttft_seconds is None and cfg.benchmark.slo.itl_seconds == 0.1
        assert all(profile.request_rates == [] for profile in cfg.benchmark.profiles)


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--slo-itl", "0"], "argument --slo-itl: 0 (allowed: more than 0 and at most 60 seconds)"),
        (["--slo-ttft", "nan"], "argument --slo-ttft: nan is not a number"),
        (["--slo-ttft", "2s"], "argument --slo-ttft: 2s is not a number"),
        (["--request-rates", "1,0"], "argument --request-rates: 0 (allowed: 0.01 to 1000 requests/s)"),
        (["--request-rates", "2,1"], "argument --request-rates: 2,1: list each rate once, in ascending order"),
    ],
)
def test_bad_objective_and_rate_flags_are_argparses_one_line_exit_2(flags, expected, capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--stage", "dev", *flags])
    assert info.value.code == 2
    assert expected in capsys.readouterr().err.splitlines()[-1]


# --- merge keeps the rate sweep ------------------------------------------------------------------------


def _rate_level(rate: float) -> results.RateLevel:
    level = make_run("pd", {"chat": {1: (100, 20, 900)}}).profiles[0].levels[0]
    fields = level.model_dump(exclude={"concurrency", "goodput"})
    return results.RateLevel(request_rate=rate, arrival="poisson", max_inflight=3, **fields)


def _with_rates(run, *rates):
    profile = run.profiles[0].model_copy(update={"rate_levels": [_rate_level(r) for r in rates]})
    return run.model_copy(update={"profiles": [profile]})


def test_merge_keeps_each_commands_rate_levels_in_rate_order_and_refuses_one_twice(tmp_path):
    a = _with_rates(make_run("pd", {"chat": {1: (100, 20, 900)}}), 2.0)
    b = _with_rates(make_run("pd", {"chat": {4: (100, 20, 900)}}), 0.5, 4.0)
    merged = results.merge([a, b])
    assert [level.request_rate for level in merged.profile("chat").rate_levels] == [0.5, 2.0, 4.0]
    assert results.load(merged.save(tmp_path / "m.json")) == merged
    with pytest.raises(results.ResultsError, match=r"profile 'chat' at 2 requests/s is in two runs"):
        results.merge([a, _with_rates(make_run("pd", {"chat": {8: (1, 1, 1)}}), 2.0)])


def test_a_saved_rate_level_with_an_impossible_goodput_is_refused_naming_the_field(tmp_path):
    run = _with_rates(make_run("pd", {"chat": {1: (100, 20, 900)}}), 2.0)
    data = run.model_dump(by_alias=True)
    data["profiles"][0]["rate_levels"][0]["goodput"] = {
        "ttft_slo_ms": 2000.0,
        "itl_slo_ms": 100.0,
        "good": 6,
        "requests": 5,
        "duration_s": 1.0,
        "per_s": 6.0,
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError) as info:
        results.load(path)
    assert str(info.value) == f"{path}: profiles.0.rate_levels.0.goodput.good: 6 is more than the 5 requests measured"


# --- recorded records: the committed H200 rehearsal's (evidence/2026-11-30-h200x2-bench/) --------------

import math
import shutil
import tarfile

from ...helpers import ROOT

EVIDENCE = ROOT / "evidence" / "2026-11-30-h200x2-bench"


@pytest.fixture(scope="module")
def rehearsal_folder(tmp_path_factory):
    """pd's first command as `ops rehearse --bench` left it: runs/dev/<time>-pd.json (saved before goodput)
    beside <time>-pd/<profile>-c<N>/profile_export.jsonl (the committed records-pd-3.tgz)."""
    out = tmp_path_factory.mktemp("rehearsal-results")
    with tarfile.open(EVIDENCE / "records-pd-3.tgz") as archive:
        archive.extractall(out, filter="data")
    path = out / "dev" / "runs" / "dev" / "20261130T223329Z-pd.json"
    shutil.copy(EVIDENCE / "run-pd-3.json", path)
    return path


def test_a_rehearsal_run_saved_before_goodput_gets_it_from_its_records(rehearsal_folder):
    run, missing = goodput.recount(results.load(rehearsal_folder), rehearsal_folder, OBJECTIVES)
    assert missing == [] and run.settings["slo"] == {"ttft_seconds": 2.0, "itl_seconds": 0.1}
    found = {(p.name, lv.concurrency): (lv.goodput.good, lv.goodput.requests) for p in run.profiles for lv in p.levels}
    assert found == {
        ("long-prompt", 1): (2, 2),
        ("long-prompt", 16): (32, 32),
        ("long-prompt", 64): (53, 102),  # 64 streams of 3500-token prompts: TTFT up to 7.1 s
        ("chat", 1): (2, 2),
        ("chat", 16): (32, 32),
    }
    measured = aiperf.requests(rehearsal_folder.with_suffix("") / "long-prompt-c64")
    span = (max(r.end_ns for r in measured) - min(r.start_ns for r in measured)) / 1e9
    level = run.profile("long-prompt").levels[2].goodput
    assert level.duration_s == span and level.per_s == 53 / span


def test_on_recorded_requests_the_ttft_objective_is_inclusive_to_the_last_digit(rehearsal_folder):
    measured = aiperf.requests(rehearsal_folder.with_suffix("") / "long-prompt-c64")
    ttfts = sorted(r.ttft_ms for r in measured)
    at = ttfts[52]  # the 53rd fastest first token
    assert goodput.count(measured, Objectives(ttft_ms=at, itl_ms=100.0)).good == 53
    assert goodput.count(measured, Objectives(ttft_ms=math.nextafter(at, 0), itl_ms=100.0)).good == 52
    itls = sorted(r.itl_ms for r in measured)
    assert goodput.count(measured, Objectives(ttft_ms=10_000.0, itl_ms=itls[9])).good == 10
    assert goodput.count(measured, Objectives(ttft_ms=10_000.0, itl_ms=math.nextafter(itls[9], 0))).good == 9


def _with_intervals(run: results.Run, bounds: dict[int, tuple[float, float]]) -> results.Run:
    """`run` (from _with_goodput) with chat's goodput at each concurrency given the interval (low, high)."""
    profiles = []
    for profile in run.profiles:
        levels = []
        for level in profile.levels:
            low, high = bounds[level.concurrency] if profile.name == "chat" else (None, None)
            interval = {"low_per_s": low, "high_per_s": high, "confidence": None if low is None else 0.95}
            assert level.goodput is not None  # _with_goodput gave every level one
            levels.append(level.model_copy(update={"goodput": level.goodput.model_copy(update=interval)}))
        profiles.append(profile.model_copy(update={"levels": levels}))
    return run.model_copy(update={"profiles": profiles})


def test_compare_states_goodput_ratios_only_with_both_intervals_and_ahead_only_where_they_part(tmp_path):
    pd = _with_intervals(
        _with_goodput(make_run("pd", LEVELS), {"chat": {1: 2, 16: 5}, "long": {1: 1, 16: 1}}),
        {1: (0.1, 0.3), 16: (0.45, 0.5)},
    )
    colocated = _with_intervals(
        _with_goodput(make_run("colocated", LEVELS), {"chat": {1: 3, 16: 2}, "long": {1: 1, 16: 1}}),
        {1: (0.2, 0.4), 16: (0.1, 0.3)},
    )
    text = report.compare(pd, colocated, tmp_path).read_text()
    chat = text.split("## chat")[1].split("## long")[0]
    # 0.2 vs 0.3 at 1 overlap (0.1-0.3 against 0.2-0.4): no one ahead; at 16 0.45-0.5 lies above 0.1-0.3
    assert (
        "- goodput: **pd** ahead at concurrency 16 (" not in chat
        and "- goodput: **pd** ahead at concurrency 16" in chat
    )
    assert "**colocated** ahead at concurrency 1" not in chat
    assert "- goodput pd/colocated at concurrency 16: 2.50x (a 0.50/s (95% 0.45-0.50; 5 requests, under 100); " in chat
    assert "| 16 | pd | 150 |" in chat and " 0.50 (5/5; 95% 0.45-0.50) |" in chat
    long = text.split("## long")[1]
    assert "- goodput pd/colocated at concurrency 1: not stated (a level without an interval, or B at 0)" in long


def test_compare_flags_a_level_whose_ttft_median_is_near_the_objective(tmp_path):
    near = {"chat": {16: (1900.0, 22, 3000)}}
    pd = _with_goodput(make_run("pd", near), {"chat": {16: 2}})
    colocated = _with_goodput(make_run("colocated", {"chat": {16: (150.0, 22, 1000)}}), {"chat": {16: 5}})
    chat = report.compare(pd, colocated, tmp_path).read_text().split("## chat")[1]
    assert "; unstable: pd (TTFT p50 near the objective)" in chat
    assert " 0.20 (2/5) **unstable** |" in chat and " 0.50 (5/5) |" in chat


def test_a_saved_goodput_whose_interval_does_not_hold_it_is_refused(tmp_path):
    run = _with_goodput(make_run("pd", {"chat": {1: (100, 20, 900)}}), {"chat": {1: 2}})
    data = run.model_dump(by_alias=True)
    data["profiles"][0]["levels"][0]["goodput"].update(low_per_s=0.3, high_per_s=0.4, confidence=0.95)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(results.ResultsError) as info:
        results.load(path)
    assert str(info.value) == (
        f"{path}: profiles.0.levels.0.goodput.low_per_s, high_per_s: 0.3-0.4 does not hold per_s 0.2 "
        "(allowed: 0 <= low <= per_s <= high)"
    )


def test_a_medians_interval_is_seeded_and_holds_the_median():
    values = [float(v) for v in range(1, 102)]
    found = goodput.median_bootstrap(values)
    assert found is not None and found == goodput.median_bootstrap(values)
    assert found.ms == 51.0 and found.low < 51.0 < found.high and found.samples == 101
    assert goodput.median_bootstrap([]) is None


def test_medians_are_apart_only_where_their_intervals_do_not_overlap():
    low = goodput.Median(10.0, 9.0, 11.0, 0.95, 40)
    assert low.apart_from(goodput.Median(13.0, 12.0, 14.0, 0.95, 40))
    assert not low.apart_from(goodput.Median(12.0, 11.0, 13.0, 0.95, 40))
