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
