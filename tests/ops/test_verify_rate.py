"""`ops verify`'s KV transfer rate (ops/verify_rate.py) against the fake cluster: the healthy gate, and each
verdict in one line with the exit code: slow transfer, no transfer, wrong backend, an exporter port that does
not answer."""

from __future__ import annotations

import json

import pytest

from clients.nixl_rate import Rate, Round, judge
from ops import verify, verify_rate
from ops.__main__ import main

from ..helpers import config_with
from .fake_cluster import SERVE, FakeCluster, Scenario, exporter_path, worker_pod_name

DECODE = "10.0.41.9"


def _run(cfg, scenario):
    with FakeCluster(scenario) as fake:
        return verify.run(cfg, fake.api(), progress=lambda *a: None), scenario


def _gate(report):
    found = report.find(verify_rate.NAME)
    assert found is not None, [c.name for c in report.checks]
    assert found.detail and "\n" not in found.detail and "\n" not in found.fix
    return found


def test_the_healthy_gate_reports_backend_bytes_and_rates(dev):
    report, scenario = _run(dev, Scenario())
    gate = _gate(report)
    assert gate.status == "pass" and report.exit_code == 0, report.table()
    # three requests of 112,066,560 bytes in 80 ms each: 11.207 Gbps per transfer
    assert gate.data["bytes"] == 3 * 112_066_560 and gate.data["transfers"] == 3
    assert gate.data["median_gbps"] == gate.data["worst_gbps"] == 11.207
    assert gate.data["floor_gbps"] == 6.25 and gate.data["pod"] == worker_pod_name(DECODE)
    assert gate.detail.endswith("; LIBFABRIC on provider=efa (1 rails)")
    # each request scraped every worker before and after, through the pod proxy; sequential, one POST each
    posts = [p for m, p in scenario.requests if m == "POST" and p == f"{SERVE}/v1/chat/completions"]
    assert len(posts) == 1 + verify_rate.REQUESTS
    # each exporter scraped until two scrapes agree: before the first request and after each (NIXL exports late)
    scrapes = [p for _, p in scenario.requests if p == exporter_path(DECODE)]
    assert len(scrapes) == 2 * (verify_rate.REQUESTS + 1)


def test_a_transfer_the_exporter_shows_late_is_counted_to_its_own_request(dev):
    # NIXL exports every 100 ms: the first scrape after a request may not show its transfer yet; the next one,
    # EXPORT_PAUSE_S (150 ms) later, does
    report, _ = _run(dev, Scenario(export_lag=1))
    gate = _gate(report)
    assert gate.status == "pass" and gate.data["bytes"] == 3 * 112_066_560 and gate.data["transfers"] == 3
    assert gate.data["median_gbps"] == gate.data["worst_gbps"] == 11.207


def test_the_requests_are_of_the_long_prompt_size_and_never_share_a_prefix(dev):
    bodies = []

    class Recording(FakeCluster):
        def answer(self, method, path, query, body):
            if method == "POST" and body and len(body["messages"][0]["content"]) > 1000:
                bodies.append(body["messages"][0]["content"])
            return super().answer(method, path, query, body)

    with Recording(Scenario()) as fake:
        verify.run(dev, fake.api(), progress=lambda *a: None)
    assert len(bodies) == verify_rate.REQUESTS
    assert all(len(b.split()) == 3500 - 32 + 5 for b in bodies)  # the profile's 3,500 less the margin, + nonce
    assert len({b.split(":")[0] for b in bodies}) == verify_rate.REQUESTS


def test_a_slow_transfer_fails_with_what_to_check(dev):
    # the same bytes in 400 ms: 2.24 Gbps, under the floor of 6.25
    report, _ = _run(dev, Scenario(kv_moves={DECODE: (112_066_560, 400_000)}))
    gate = _gate(report)
    assert gate.status == "fail" and report.exit_code == 1
    assert gate.detail.startswith(f"slow transfer: {worker_pod_name(DECODE)}: 336,199,680 bytes in 3 requests")
    assert "median 2.241 Gbps, worst 2.241 (floor 6.25)" in gate.detail
    assert "check the EFA path (LIBFABRIC on provider=efa (1 rails))" in gate.fix
    assert "docs/OPERATIONS.md, 'The fabric gate'" in gate.fix


def test_no_transfer_fails(dev):
    report, _ = _run(dev, Scenario(kv_moves={}))
    gate = _gate(report)
    assert gate.status == "fail" and report.exit_code == 1
    assert gate.detail == "3 long-prompt requests moved no KV bytes over NIXL (no worker's agent_rx_bytes_total rose)"


def test_the_wrong_backend_fails_even_at_speed(dev):
    report, _ = _run(dev, Scenario(worker_logs={"10.0.40.17": "efa.log", DECODE: "tcp.log"}))
    gate = _gate(report)
    assert gate.status == "fail" and report.exit_code == 1
    assert gate.detail.startswith("wrong backend: ") and "provider=tcp" in gate.detail
    assert gate.data["median_gbps"] == 11.207  # fast enough, on the wrong provider all the same


def test_an_exporter_port_that_does_not_answer_fails(dev):
    refused = {
        "kind": "Status",
        "status": "Failure",
        "message": f"error trying to reach service: dial tcp {DECODE}:9090: connect: connection refused",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
    raw = {exporter_path(DECODE): (503, "application/json", json.dumps(refused).encode())}
    report, _ = _run(dev, Scenario(raw=raw))
    gate = _gate(report)
    assert gate.status == "fail" and report.exit_code == 1
    assert gate.detail.startswith(f"NIXL's exporter on {worker_pod_name(DECODE)} (port 9090) did not answer: ")
    assert "connection refused" in gate.detail and "NIXL_TELEMETRY_*" in gate.fix


def test_an_answer_that_is_not_the_exporter_fails(dev):
    raw = {exporter_path(DECODE): (200, "text/plain", b"ray_node_cpu_count 32\n")}
    report, _ = _run(dev, Scenario(raw=raw))
    gate = _gate(report)
    assert gate.status == "fail" and "not NIXL's Prometheus exporter" in gate.detail


def test_colocated_mode_skips_the_gate(tmp_path):
    report, scenario = _run(config_with(tmp_path, serving={"mode": "colocated"}), Scenario())
    assert _gate(report).status == "skip" and report.exit_code == 0
    assert not [p for _, p in scenario.requests if "/pods" in p]


def test_a_stated_floor_without_efa_is_the_bar(tmp_path):
    cfg = config_with(tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_transfer_floor_gbps": 20})
    logs = {"10.0.40.17": "tcp.log", DECODE: "tcp.log"}
    report, _ = _run(cfg, Scenario(worker_logs=logs))
    gate = _gate(report)
    assert gate.status == "fail" and gate.detail.startswith("slow transfer:") and "(floor 20)" in gate.detail


@pytest.mark.parametrize(
    ("scenario", "phrase"),
    [
        (Scenario(kv_moves={DECODE: (112_066_560, 400_000)}), "slow transfer: "),
        (Scenario(kv_moves={}), "moved no KV bytes over NIXL"),
    ],
)
def test_the_command_exits_1_with_the_verdict_line(dev, monkeypatch, capsys, scenario, phrase):
    with FakeCluster(scenario) as fake:
        monkeypatch.setattr(verify, "cluster_access", lambda cfg, session: None)
        monkeypatch.setattr(verify, "connect", lambda cfg, session, access, **kw: fake.api())
        code = main(["verify", "--stage", "dev"])
    out = capsys.readouterr().out
    assert code == 1
    (line,) = [line for line in out.splitlines() if line.startswith(verify_rate.NAME)]
    assert "FAIL" in line and phrase in line


def test_a_request_whose_kv_did_not_cross_fails_the_gate():
    moved, idle = Rate(112_066_560, 1, 0.08), Rate(0, 0, 0.0)
    pod = worker_pod_name(DECODE)
    done = [Round({pod: moved}), Round({pod: idle}), Round({pod: moved})]
    status, detail, fix, _ = judge(done, 6.25, None, verify_rate.FIXES)
    assert (status, detail) == ("fail", f"1 of 3 long-prompt requests moved no KV bytes to {pod}")
    assert "run verify again" in fix


def test_without_a_log_finding_the_backend_is_said_to_be_unread():
    pod = worker_pod_name(DECODE)
    status, _, _, data = judge([Round({pod: Rate(112_066_560, 1, 0.08)})], 6.25, None, verify_rate.FIXES)
    assert status == "pass" and data["backend"].startswith("not read")
