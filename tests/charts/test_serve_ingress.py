"""charts/serve_ingress.py: the variables each way in sets, and HAProxy's open-file arithmetic."""

from __future__ import annotations

import os

import pytest

from charts.serve_ingress import (
    INGRESSES,
    SERVE_DEFAULT_MAXCONN,
    SERVER_HEADROOM,
    haproxy_descriptors,
    haproxy_maxconn,
    serve_ingress_environment,
)


def test_serves_own_proxy_needs_no_variable():
    assert serve_ingress_environment("serve_proxy") == []


def test_haproxy_streams_from_the_engines_server_in_either_mode():
    assert serve_ingress_environment("haproxy") == [
        {"name": "RAY_SERVE_ENABLE_HA_PROXY", "value": "1"},
        {"name": "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING", "value": "1"},
    ]


def test_an_unknown_ingress_is_refused_naming_the_field():
    with pytest.raises(ValueError, match=r"serving\.serve_ingress: 'nginx' \(allowed: serve_proxy, haproxy\)"):
        serve_ingress_environment("nginx")


@pytest.mark.skipif("RAY_SERVE_HAPROXY_MAXCONN" in os.environ, reason="Ray's default is overridden here")
def test_the_default_connection_limit_is_rays():
    from ray.serve._private import constants

    assert constants.RAY_SERVE_HAPROXY_MAXCONN == SERVE_DEFAULT_MAXCONN


def test_the_ingresses_are_the_stage_settings_values():
    assert INGRESSES == ("serve_proxy", "haproxy")


def test_serves_default_connection_limit_asks_for_what_haproxy_alerted_on_the_h200_host():
    # "Cannot raise FD limit to 50036, limit is 20000." (evidence/2026-12-05-h200-phases)
    assert haproxy_descriptors(SERVE_DEFAULT_MAXCONN) == 50_036


def test_each_backend_server_takes_one_more_descriptor():
    # HAProxy's Maxsock at 1,024 connections: 2,596 with no server, 2,600 with three replicas and the fallback proxy
    assert (haproxy_descriptors(1_024), haproxy_descriptors(1_024, servers=4)) == (2_596, 2_600)


def test_an_eks_node_gives_haproxy_room_for_serves_default():
    # AL2023's RLIMIT_NOFILE soft limit for a container: enough without raising it to the hard one
    assert haproxy_descriptors(SERVE_DEFAULT_MAXCONN, servers=SERVER_HEADROOM) <= 65_536


@pytest.mark.parametrize("open_files", [1_024, 20_000, 65_536])
def test_the_connection_limit_for_a_file_limit_is_the_largest_that_fits(open_files):
    maxconn = haproxy_maxconn(open_files)
    assert (
        haproxy_descriptors(maxconn, SERVER_HEADROOM) <= open_files < haproxy_descriptors(maxconn + 1, SERVER_HEADROOM)
    )


def test_no_connections_fit_fewer_files_than_haproxys_own():
    assert haproxy_maxconn(10) == 0
