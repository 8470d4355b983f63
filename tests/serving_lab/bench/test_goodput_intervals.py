"""The rules that make a benchmark's figures hold on a rerun (serving_lab/bench/goodput.py, issue #35): a goodput's
bootstrap interval over its requests, the "unstable" flag for a TTFT p50 near the objective, ratios only with both
intervals, and the request count a level needs."""

from __future__ import annotations

import pytest

from serving_lab.bench import aiperf, goodput

OBJ = goodput.Objectives.of_seconds(2.0, 0.1)


def _requests(good: int, bad: int, span_s: float = 10.0) -> list[aiperf.RequestMetrics]:
    """`good` requests within both objectives and `bad` ones with a late first token, started evenly over
    `span_s` - 1 s and ending 1 s after their start: the level spans `span_s`."""
    n = good + bad
    out = []
    for i in range(n):
        start = int(i * (span_s - 1.0) / max(n - 1, 1) * 1e9)
        ttft = 500.0 if i < good else 2500.0
        out.append(
            aiperf.RequestMetrics(
                request_id=str(i),
                error=None,
                ttft_ms=ttft,
                itl_ms=7.0,
                e2e_ms=ttft + 255 * 7.0,
                start_ns=start,
                end_ns=start + int(min(ttft + 255 * 7.0, 1000.0) * 1e6),
                output_tokens=256,
            )
        )
    return out


def test_the_interval_brackets_the_goodput_and_is_the_same_on_the_same_records():
    measured = _requests(good=60, bad=60)
    first = goodput.bootstrap(measured, OBJ)
    assert first is not None and first == goodput.bootstrap(measured, OBJ)  # seeded
    assert first.per_s == pytest.approx(60 / 10.0)
    assert first.low < first.per_s < first.high
    # half good over 120 requests: the binomial spread, about +-1.96 x sqrt(120 x 0.25) = +-10.7 requests
    assert first.low == pytest.approx((60 - 10.7) / 10.0, abs=0.25)
    assert first.high == pytest.approx((60 + 10.7) / 10.0, abs=0.25)
    assert first.enough and first.requests == 120


def test_few_requests_give_a_wide_interval_and_say_so():
    few = goodput.bootstrap(_requests(good=4, bad=30), OBJ)
    assert few is not None and not few.enough
    assert few.text().endswith("; 34 requests, under 100)")
    assert few.high / max(few.low, 1e-9) > 3  # 0.37/s with 4 of 34 good says little


def test_all_good_or_none_good_has_no_spread():
    all_good = goodput.bootstrap(_requests(good=50, bad=0), OBJ)
    none_good = goodput.bootstrap(_requests(good=0, bad=50), OBJ)
    assert all_good is not None and all_good.low == all_good.high == all_good.per_s
    assert none_good is not None and (none_good.low, none_good.high, none_good.per_s) == (0.0, 0.0, 0.0)


def test_no_timestamps_no_interval():
    bare = [aiperf.RequestMetrics(request_id="x", error=None, ttft_ms=1.0, itl_ms=1.0, e2e_ms=2.0)]
    assert goodput.bootstrap(bare, OBJ) is None


@pytest.mark.parametrize(
    ("p50_ms", "flagged"),
    [(1500, False), (1600, True), (2000, True), (2400, True), (2401, False), (2807, False), (367, False)],
)
def test_a_ttft_p50_within_20_percent_of_the_objective_is_unstable(p50_ms, flagged):
    assert goodput.unstable(p50_ms, OBJ) is flagged


def test_a_ratio_is_stated_only_with_both_intervals():
    pd = goodput.bootstrap(_requests(good=90, bad=30), OBJ)
    colocated = goodput.bootstrap(_requests(good=45, bad=75), OBJ)
    stated = goodput.ratio(pd, colocated)
    assert stated is not None and stated.startswith("2.00x (a 9.00/s (95% ")
    assert "; b 4.50/s (95% " in stated
    assert goodput.ratio(pd, None) is None and goodput.ratio(None, colocated) is None
    zero = goodput.bootstrap(_requests(good=0, bad=10), OBJ)
    assert goodput.ratio(pd, zero) is None


def test_a_level_counted_from_its_records_carries_its_interval(tmp_path):
    from tests.serving_lab.bench import records

    good = [records.Request(start_ms=i * 100.0, end_ms=i * 100.0 + 900, ttft_ms=400.0, itl_ms=7.0) for i in range(30)]
    late = [
        records.Request(start_ms=i * 100.0, end_ms=i * 100.0 + 900, ttft_ms=2500.0, itl_ms=7.0) for i in range(30, 60)
    ]
    found = goodput.of_folder(records.write(tmp_path / "chat-c4", good + late), OBJ)
    assert found is not None and found.good == 30 and found.requests == 60
    interval = goodput.interval_of(found)
    assert interval is not None and interval.confidence == 0.95
    assert interval.low < found.per_s < interval.high  # 30 of 60 good: a spread either side
    assert interval == goodput.bootstrap(aiperf.requests(tmp_path / "chat-c4"), OBJ)


def test_a_goodput_saved_before_intervals_has_none():
    from serving_lab.bench.results import Goodput

    old = Goodput(ttft_slo_ms=2000, itl_slo_ms=100, good=3, requests=4, duration_s=2.0, per_s=1.5)
    assert goodput.interval_of(old) is None
    assert goodput.interval_of(None) is None


@pytest.mark.parametrize(("p50_ms", "flagged"), [(1700.0, True), (1500.0, False)])
def test_a_level_is_unstable_by_its_own_ttft_and_the_objective_it_was_counted_under(p50_ms, flagged):
    from serving_lab.bench.results import Goodput
    from tests.serving_lab.bench.runs import make_level

    level = make_level(16, ttft=p50_ms, itl=7.0, e2e=3000.0)
    counted = Goodput(ttft_slo_ms=2000, itl_slo_ms=100, good=3, requests=4, duration_s=2.0, per_s=1.5)
    assert goodput.level_unstable(level.model_copy(update={"goodput": counted})) is flagged
    assert goodput.level_unstable(level) is False  # no goodput: nothing to flip
