"""serving_lab/rehearse/phases.py and checks.ttft_phases: a round's requests, each with an id of its own, joined
with the engines' spans once they arrived."""

from __future__ import annotations

from clients.report import Report
from serving_lab.rehearse import checks, phases, traces


def _joined(client: dict[str, float], missing: int = 0) -> traces.PerRequest:
    """The round's rows with the spans of all but the last `missing` requests."""
    ids = sorted(client)
    rows = [traces.Row(rid, client[rid], 0.001, 0.1) for rid in ids[: len(ids) - missing]]
    rows += [traces.Row(rid, client[rid], missing=("prefill span",)) for rid in ids[len(ids) - missing :]]
    return traces.PerRequest(rows, spans=len(ids) - missing)


def test_a_round_sends_each_request_once_in_order_or_concurrently():
    sent = []
    assert phases.send_round(lambda i: sent.append(i) or 0.1 * i, requests=3) == [0.0, 0.1, 0.2]
    assert sent == [0, 1, 2]
    sent.clear()
    assert len(phases.send_round(lambda i: sent.append(i) or 0.5, requests=16, concurrency=16)) == 16
    assert sorted(sent) == list(range(16))


def test_settling_waits_until_every_request_has_its_spans():
    arrivals = iter([1, 1, 0])  # requests still missing spans at each look
    waits = []
    found = phases.settle(lambda: _joined({"a": 0.2, "b": 0.3}, next(arrivals)), wait=waits.append, clock=lambda: 0)
    assert found.complete == 2 and waits == [phases.SPAN_POLL_S] * 2


def test_settling_gives_up_at_the_timeout_with_the_rows_as_they_stand():
    clock = iter([0.0, 5.0, 12.0])
    found = phases.settle(
        lambda: _joined({"a": 0.2, "b": 0.3}, 1), timeout=12, wait=lambda s: None, clock=lambda: next(clock)
    )
    assert (found.complete, len(found.rows)) == (1, 2)


def test_probe_prompts_differ_so_prefix_caching_cannot_shorten_a_prefill():
    prompts = {checks.probe_prompt(i) for i in range(50)}
    assert len(prompts) == 50
    assert len({p.split()[2] for p in prompts}) == 50  # they differ from their first word on


def test_each_probe_request_has_its_own_id_and_the_round_is_joined_by_them(monkeypatch):
    sent = []
    monkeypatch.setattr(
        checks, "stream_chat", lambda *a, request_id, **k: sent.append(request_id) or {"ttft_s": 0.3, "chunks": 16}
    )
    report = Report("rehearse", "dev")
    found = checks.ttft_phases(report, "http://127.0.0.1:1", "m", requests=2, per_request=_joined)
    assert len(set(sent)) == 2 and set(found.per_request.medians) == {
        "client_ttft_s",
        "prefill_queue_s",
        "prefill_compute_s",
    }
    (row,) = report.checks
    assert (row.name, row.status) == ("TTFT phases, 1 stream at a time", "pass")
    assert row.data == {"medians": {"client_ttft_s": 0.3, "prefill_queue_s": 0.001, "prefill_compute_s": 0.1}}
    assert "per_request" not in row.data  # the report keeps the rows out; ttft-phases-MODE.json has them
    assert found.to_json()["per_request"]["complete"] == 2 and found.to_json()["concurrency"] == 1


def test_a_round_with_a_request_short_of_its_spans_is_a_warning(monkeypatch):
    monkeypatch.setattr(phases, "SPAN_WAIT_S", 0)
    monkeypatch.setattr(checks, "stream_chat", lambda *a, **k: {"ttft_s": 0.3, "chunks": 16})
    report = Report("rehearse", "dev")
    checks.ttft_phases(report, "http://127.0.0.1:1", "m", requests=2, per_request=lambda c: _joined(c, 1))
    (row,) = report.checks
    assert row.status == "warn" and "1 of 2 with every span" in row.detail


def test_without_the_span_receiver_a_round_has_the_clients_ttft_and_a_warning(monkeypatch):
    monkeypatch.setattr(checks, "stream_chat", lambda *a, **k: {"ttft_s": 0.3, "chunks": 16})
    report = Report("rehearse", "dev")
    found = checks.ttft_phases(report, "http://127.0.0.1:1", "m", requests=2, concurrency=16)
    (row,) = report.checks
    assert row.status == "warn" and row.detail.endswith("no phases: the span receiver is not running")
    assert found.to_json() == {
        "requests": 2,
        "concurrency": 16,
        "client_ttft_s": [0.3, 0.3],
        "client_ttft_median_s": 0.3,
    }


def test_a_stream_without_tokens_is_a_warning(monkeypatch):
    monkeypatch.setattr(checks, "stream_chat", lambda *a, **k: {"ttft_s": None, "chunks": 0})
    report = Report("rehearse", "dev")
    assert checks.ttft_phases(report, "http://127.0.0.1:1", "m", requests=2) is None
    (row,) = report.checks
    assert row.status == "warn" and "streamed no token" in row.detail
