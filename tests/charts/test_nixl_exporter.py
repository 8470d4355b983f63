"""NIXL's own Prometheus exporter on the PD workers (charts/worker_env.py): the environment that turns it on
(ai-dynamo/nixl src/plugins/telemetry/prometheus/README.md), the named port the scraper and verify find, and
neither on a colocated stage, where NIXL moves nothing."""

from __future__ import annotations

import pytest

from config.topology import (
    DASHBOARD_AGENT_PORT,
    DASHBOARD_PORT,
    GCS_PORT,
    METRICS_PORT,
    NIXL_METRICS_PORT,
    NIXL_PORT_BASE,
    SERVE_PORT,
)

from ..helpers import config_with
from .test_inference_chart import chart_objects, container, env, workers


@pytest.fixture(scope="module")
def dev_objects(dev):
    return chart_objects(dev)


def test_pd_workers_serve_nixl_metrics_on_a_named_port(dev_objects):
    worker = container(workers(dev_objects))
    assert worker["ports"] == [{"name": "nixl-metrics", "containerPort": 9090}]
    values = env(workers(dev_objects))
    assert values["NIXL_TELEMETRY_ENABLE"] == "y"
    assert values["NIXL_TELEMETRY_EXPORTER"] == "prometheus"
    assert values["NIXL_TELEMETRY_PROMETHEUS_PORT"] == "9090"


def test_the_port_is_none_of_rays():
    # Ray's fixed ports, its worker ports 10002-19999 and the NIXL side channels from 20000 (config/topology.py)
    fixed = {GCS_PORT, SERVE_PORT, METRICS_PORT, DASHBOARD_AGENT_PORT, DASHBOARD_PORT}
    port = NIXL_METRICS_PORT
    assert port not in fixed and not 10002 <= port <= 19999 and port < min(NIXL_PORT_BASE.values())


def test_colocated_workers_have_no_exporter(tmp_path):
    objects = chart_objects(config_with(tmp_path, serving={"mode": "colocated"}))
    worker = container(workers(objects))
    assert "ports" not in worker
    assert not [name for name in env(workers(objects)) if name.startswith("NIXL_TELEMETRY")]
