"""clients/nixl_rate.py: the rate from two scrapes of NIXL's exporter."""

from __future__ import annotations

import pytest

from clients import nixl_rate
from clients.nixl_rate import Rate, RateError, counters, rate

from .nixl_exporter import exporter_text

MEASURED = 672_399_360  # the decode worker's rx for 6 PD requests on the rehearsal host


def test_the_measured_round_gives_its_bytes_transfers_seconds_and_gbps():
    found = rate(exporter_text(0, 0, 0), exporter_text(MEASURED, 6, 500_000))
    assert found == Rate(bytes=MEASURED, transfers=6, seconds=0.5)
    assert found.gbps == pytest.approx(MEASURED * 8 / 0.5 / 1e9)  # 10.76 Gbps
    assert found.moved


def test_only_the_counters_count_not_the_gauges_of_the_same_base_name():
    assert counters(exporter_text(100, 2, 30)) == {
        "agent_rx_bytes_total": 100,
        "agent_rx_requests_num_total": 2,
        "agent_xfer_time_total": 30,
    }


def test_series_of_several_agents_are_summed():
    two = exporter_text(100, 1, 10, agent="a") + exporter_text(50, 1, 5, agent="b")
    assert counters(two)["agent_rx_bytes_total"] == 150


def test_nothing_moved_is_zero_bytes_and_no_rate():
    found = rate(exporter_text(MEASURED, 6, 500_000), exporter_text(MEASURED, 6, 500_000))
    assert not found.moved and found.gbps is None


def test_an_answer_that_is_not_the_exporter_is_refused():
    with pytest.raises(RateError, match="not NIXL's Prometheus exporter"):
        rate("ray_node_cpu_count 32\n", exporter_text(1, 1, 1))


def test_a_counter_that_went_backwards_is_a_restart():
    with pytest.raises(RateError, match="agent_rx_bytes_total went backwards"):
        rate(exporter_text(1000, 2, 10), exporter_text(10, 3, 20))


def test_a_timestamp_after_the_value_is_read():
    text = (
        exporter_text(7, 1, 2)
        .replace("agent_rx_bytes_total{", "agent_rx_bytes_total{")
        .replace(" 7\n", " 7 1764800000000\n")
    )
    assert counters(text)["agent_rx_bytes_total"] == 7


def _answers(*bytes_seen: int):
    """A scrape that gives these decode counters in turn, then the last again."""
    texts = [{"decode": exporter_text(moved, moved // 100, moved // 10)} for moved in bytes_seen]
    calls: list[int] = []

    def scrape():
        calls.append(len(calls))
        return texts[min(len(calls) - 1, len(texts) - 1)]

    return scrape, calls


def test_a_settled_scrape_is_two_that_agree_an_export_pause_apart():
    pauses: list[float] = []
    scrape, calls = _answers(100, 300)  # the transfer shows from the second scrape on
    found = nixl_rate.settled(scrape, sleep=pauses.append)
    assert nixl_rate.counters(found["decode"])[nixl_rate.RX_BYTES] == 300
    assert len(calls) == 3 and pauses == [nixl_rate.EXPORT_PAUSE_S] * 2
    assert nixl_rate.EXPORT_PAUSE_S > 0.1  # longer than NIXL's export interval: one late scrape at most


def test_counters_that_never_settle_end_after_the_tries_with_the_last():
    scrape, calls = _answers(*range(100, 100 * (nixl_rate.SETTLE_TRIES + 5), 100))
    found = nixl_rate.settled(scrape, sleep=lambda _: None)
    assert len(calls) == nixl_rate.SETTLE_TRIES + 1
    assert nixl_rate.counters(found["decode"])[nixl_rate.RX_BYTES] == 100 * (nixl_rate.SETTLE_TRIES + 1)


def test_an_exporter_that_does_not_answer_settles_on_its_empty_answer():
    assert nixl_rate.settled(lambda: "", sleep=lambda _: None) == ""
