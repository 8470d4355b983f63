"""serving_lab/rehearse/phases.py: the probe's share of vLLM's and Serve's histograms, per engine."""

from __future__ import annotations

import pytest

from clients.report import Report
from serving_lab.rehearse import checks, phases, traces


def _histogram(name: str, labels: str, total: float, count: float) -> str:
    return (
        f"# TYPE {name} histogram\n"
        f'{name}_bucket{{{labels},le="+Inf"}} {count}\n'
        f"{name}_sum{{{labels}}} {total}\n"
        f"{name}_count{{{labels}}} {count}\n"
    )


PREFILL = 'WorkerId="aa",model_name="qwen3.5-9b",engine="0"'
DECODE = 'WorkerId="bb",model_name="qwen3.5-9b",engine="0"'


def _scrape(requests: int, *, prefill_e2e: float, decode_ttft: float, xfer: float, serve_ms: float) -> str:
    """What the head's metrics endpoint shows after `requests` PD requests of 16 tokens each."""
    n = requests
    return "".join(
        [
            _histogram("ray_vllm_e2e_request_latency_seconds", PREFILL, prefill_e2e * n, n),
            _histogram("ray_vllm_time_to_first_token_seconds", PREFILL, prefill_e2e * n, n),
            _histogram("ray_vllm_request_queue_time_seconds", PREFILL, 0.001 * n, n),
            _histogram("ray_vllm_request_generation_tokens", PREFILL, 1.0 * n, n),
            _histogram("ray_vllm_request_prompt_tokens", PREFILL, 250.0 * n, n),
            _histogram("ray_vllm_e2e_request_latency_seconds", DECODE, 0.5 * n, n),
            _histogram("ray_vllm_time_to_first_token_seconds", DECODE, decode_ttft * n, n),
            _histogram("ray_vllm_request_generation_tokens", DECODE, 16.0 * n, n),
            _histogram("ray_vllm_nixl_xfer_time_seconds", DECODE, xfer * n, n),
            _histogram("ray_serve_deployment_processing_latency_ms", 'deployment="PDProxyServer"', serve_ms * n, n),
            "# TYPE ray_vllm_num_requests_running gauge\n",
            f"ray_vllm_num_requests_running{{{DECODE}}} 0\n",
        ]
    )


def test_the_probe_share_is_the_difference_of_sums_over_the_difference_of_counts():
    # 8 earlier requests of 0.9 s each, then 4 probe requests of 0.02 s: only the probe's mean comes out.
    name = "ray_vllm_e2e_request_latency_seconds"
    before = _histogram(name, PREFILL, 8 * 0.9, 8) + _histogram("ray_vllm_request_generation_tokens", PREFILL, 8, 8)
    after = _histogram(name, PREFILL, 8 * 0.9 + 4 * 0.02, 12) + _histogram(
        "ray_vllm_request_generation_tokens", PREFILL, 12, 12
    )
    found = phases.breakdown(before, after, [0.3, 0.31, 0.29, 0.3])
    (prefill,) = found.engines
    assert prefill["role"] == "prefill"
    assert prefill["requests"] == 4
    assert prefill["e2e"] == pytest.approx(0.02)
    assert found.complete


def test_engines_are_told_apart_by_tokens_generated_and_the_gap_outside_them_is_computed():
    found = phases.breakdown(
        "",
        _scrape(10, prefill_e2e=0.025, decode_ttft=0.1, xfer=0.004, serve_ms=310),
        [0.30, 0.31, 0.29, 0.30, 0.30, 0.32, 0.28, 0.30, 0.30, 0.30],
    )
    assert [e["role"] for e in found.engines] == ["prefill", "decode"]
    prefill, decode = found.engines
    assert prefill["e2e"] == pytest.approx(0.025)
    assert prefill["prompt_tokens"] == pytest.approx(250)
    assert decode["ttft"] == pytest.approx(0.1)
    assert decode["nixl_xfer"] == pytest.approx(0.004)
    assert decode["nixl_transfers"] == 10
    assert found.deployments == {"PDProxyServer": pytest.approx(310)}
    assert found.outside_engines_s() == pytest.approx(0.30 - 0.025 - 0.1)
    assert found.complete
    assert found.to_json()["outside_engines_s"] == pytest.approx(0.175)


def test_a_count_that_is_not_the_probe_s_is_reported_incomplete():
    found = phases.breakdown("", _scrape(9, prefill_e2e=0.02, decode_ttft=0.1, xfer=0.004, serve_ms=300), [0.3] * 10)
    assert not found.complete
    assert "the probe sent 10" in found.note


def test_labels_with_escaped_quotes_and_other_series_do_not_confuse_the_parser():
    text = (
        'ray_vllm_e2e_request_latency_seconds_sum{model_name="a\\"b",le="x"} 2.0\n'
        'ray_vllm_e2e_request_latency_seconds_count{model_name="a\\"b"} 4\n'
        "ray_other_sum 5\n"
        "garbage line\n"
    )
    parsed = phases.parse(text)
    assert parsed == {("ray_vllm_e2e_request_latency_seconds", (("model_name", 'a\\"b'),)): (2.0, 4.0)}


def test_the_probe_scrapes_after_the_export_wait_then_sends_then_waits_again():
    events = []
    found = phases.probe(
        scrape=lambda: events.append("scrape") or "",
        send=lambda i: events.append(f"send {i}") or 0.25,
        requests=3,
        wait=lambda seconds: events.append(f"wait {seconds:g}"),
        export_wait_s=12,
    )
    assert events == ["wait 12", "scrape", "send 0", "send 1", "send 2", "wait 12", "scrape"]
    assert found.client_ttft_s == [0.25, 0.25, 0.25]
    assert found.engines == []


def test_probe_prompts_differ_so_prefix_caching_cannot_shorten_a_prefill():
    prompts = {checks.probe_prompt(i) for i in range(50)}
    assert len(prompts) == 50
    assert len({p.split()[2] for p in prompts}) == 50  # they differ from their first word on


def test_the_check_reports_the_phases_and_a_stream_without_tokens_as_a_warning(monkeypatch):
    monkeypatch.setattr(phases, "EXPORT_WAIT_S", 0)
    metrics = iter(["", _scrape(2, prefill_e2e=0.02, decode_ttft=0.1, xfer=0.004, serve_ms=300)])
    monkeypatch.setattr(checks, "stream_chat", lambda *a, **k: {"ttft_s": 0.3, "chunks": 16})
    report = Report("rehearse", "dev")
    found = checks.ttft_phases(report, "http://127.0.0.1:1", "m", lambda: next(metrics), requests=2)
    assert found is not None and found.complete
    (row,) = report.checks
    assert row.status == "pass"
    assert "outside the engines" in row.detail

    monkeypatch.setattr(checks, "stream_chat", lambda *a, **k: {"ttft_s": None, "chunks": 0})
    report = Report("rehearse", "dev")
    assert checks.ttft_phases(report, "http://127.0.0.1:1", "m", lambda: "", requests=2) is None
    (row,) = report.checks
    assert row.status == "warn"
    assert "streamed no token" in row.detail


def test_a_concurrent_round_sends_every_request_once_and_records_its_concurrency():
    sent = []
    found = phases.probe(lambda: "", lambda i: sent.append(i) or 0.5, requests=16, concurrency=16, export_wait_s=0)
    assert sorted(sent) == list(range(16))
    assert found.concurrency == 16
    assert found.to_json()["concurrency"] == 16


def _buckets(name: str, labels: str, cumulative: dict[str, float], total: float) -> str:
    lines = [f"# TYPE {name} histogram\n"]
    lines += [f'{name}_bucket{{{labels},le="{le}"}} {count}\n' for le, count in cumulative.items()]
    count = max(cumulative.values())
    return "".join(lines + [f"{name}_sum{{{labels}}} {total}\n", f"{name}_count{{{labels}}} {count}\n"])


def test_the_nixl_histograms_keep_the_probes_transfers_per_bucket():
    # Ray rebuilds _sum from bucket midpoints, so the counts per bucket are the exact part: 2 earlier transfers,
    # then the probe's 12 (3 in 0.1-0.2 s, 9 in 0.2-0.3 s: what the H200 run showed over UCX)
    xfer = "ray_vllm_nixl_xfer_time_seconds"
    before = _buckets(xfer, DECODE, {"0.1": 0, "0.2": 2, "0.3": 2, "+Inf": 2}, 0.3) + _histogram(
        "ray_vllm_request_generation_tokens", DECODE, 32, 2
    )
    after = (
        _buckets(xfer, DECODE, {"0.1": 0, "0.2": 5, "0.3": 14, "+Inf": 14}, 0.3 + 12 * 0.225)
        + _buckets("ray_vllm_nixl_num_descriptors", DECODE, {"30": 0, "50": 12, "+Inf": 12}, 480)
        + _histogram("ray_vllm_request_generation_tokens", DECODE, 32 + 12 * 16, 14)
    )
    found = phases.breakdown(before, after, [0.4] * 12)
    (decode,) = found.engines
    assert decode["nixl_xfer"] == pytest.approx(0.225)
    assert decode["nixl_xfer_buckets"] == {"0.1-0.2": 3, "0.2-0.3": 9}
    assert decode["nixl_descs"] == pytest.approx(40) and decode["nixl_descs_buckets"] == {"30-50": 12}
    assert "  nixl_xfer per bucket (transfers): 0.1-0.2: 3, 0.2-0.3: 9" in found.lines()


def test_each_probe_request_has_its_own_id_and_the_round_is_joined_by_them(monkeypatch):
    monkeypatch.setattr(phases, "EXPORT_WAIT_S", 0)
    metrics = iter(["", _scrape(2, prefill_e2e=0.02, decode_ttft=0.1, xfer=0.004, serve_ms=300)])
    sent = []
    monkeypatch.setattr(
        checks, "stream_chat", lambda *a, request_id, **k: sent.append(request_id) or {"ttft_s": 0.3, "chunks": 16}
    )
    joined = []

    def per_request(client):  # the spans of the second request did not arrive
        joined.append(dict(client))
        first, second = sorted(client)
        return traces.PerRequest([traces.Row(first, 0.3, 0.001, 0.1), traces.Row(second, 0.3, missing=("x",))], 3)

    report = Report("rehearse", "dev")
    found = checks.ttft_phases(
        report, "http://127.0.0.1:1", "m", lambda: next(metrics), requests=2, per_request=per_request
    )
    assert len(set(sent)) == 2 and joined == [dict.fromkeys(sent, 0.3)]
    histograms, per = report.checks
    assert "per_request" not in histograms.data  # the report keeps the rows out; ttft-phases-MODE.json has them
    assert (per.name, per.status) == ("TTFT phases, 1 stream at a time, per request", "warn")
    assert per.data == {"medians": {"client_ttft_s": 0.3, "prefill_queue_s": 0.001, "prefill_compute_s": 0.1}}
    assert found is not None and found.to_json()["per_request"]["complete"] == 1
