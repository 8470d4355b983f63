"""NIXL's Prometheus exporter's answer as the decode worker gave it on the rehearsal host (NIXL 1.3.1, the
project's pinned wheels, 2026-12-04): counters with `# HELP`/`# TYPE` lines, each labelled agent_name and
hostname, beside the last-value gauges of the same base names (ai-dynamo/nixl src/plugins/telemetry/prometheus/
README.md). Only the numbers vary here."""

from __future__ import annotations


def exporter_text(
    rx_bytes: int, requests: int, time_us: int, *, agent: str = "decode-0", host: str = "ip-10-0-41-9"
) -> str:
    labels = f'agent_name="{agent}",hostname="{host}"'
    series = [
        ("agent_rx_bytes_total", "counter", rx_bytes),
        ("agent_tx_bytes_total", "counter", 0),
        ("agent_rx_requests_num_total", "counter", requests),
        ("agent_tx_requests_num_total", "counter", 0),
        ("agent_xfer_time_total", "counter", time_us),
        ("agent_xfer_post_time_total", "counter", requests * 40),
        ("agent_rx_last_bytes", "gauge", rx_bytes // max(requests, 1)),
        ("agent_xfer_time", "gauge", time_us // max(requests, 1)),
    ]
    lines = []
    for name, kind, value in series:
        lines += [f"# HELP {name} {name}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {value}"]
    return "\n".join(lines) + "\n"
