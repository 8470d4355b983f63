"""The bearer token goes only to a server the cluster's own CA vouches for, as kubectl trusts the
certificate-authority-data of its kubeconfig alone: a server whose certificate a CA of the system's store
signed (a TLS-inspecting proxy, say: its CA installed on the host) gets no request, the cluster's CA is
accepted, and a cluster without CA data is refused before any connection. SSL_CERT_FILE / SSL_CERT_DIR
(OpenSSL's names for the system's store, read when the default paths are loaded) stand for that store."""

from __future__ import annotations

import base64
import json

import pytest

from clients.kube import KubeApi, KubeError
from localcluster import pki

from .fake_cluster import TOKEN, tls
from .http_server import Server


def _version(method, path):
    return 200, {"Content-Type": "application/json"}, json.dumps({"major": "1", "minor": "35"}).encode()


@pytest.fixture
def server():
    """A server whose certificate tls()'s CA signed."""
    with Server(_version, https=True) as running:
        yield running


@pytest.fixture
def other_ca(tmp_path) -> str:
    """A cluster CA that did not sign the server's certificate, as EKS returns one (base64 of the PEM)."""
    return base64.b64encode(pki.make(tmp_path / "pki").ca_cert.read_bytes()).decode()


@pytest.fixture
def system_store_trusts_the_server(tmp_path, monkeypatch):
    ca = tmp_path / "system-ca.pem"
    ca.write_text(tls().ca_pem)
    folder = tmp_path / "certs"
    folder.mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    monkeypatch.setenv("SSL_CERT_DIR", str(folder))


def test_a_server_the_system_store_trusts_but_the_cluster_ca_does_not_gets_no_token(
    server, other_ca, system_store_trusts_the_server
):
    api = KubeApi(server.endpoint, TOKEN, ca_data=other_ca, timeout=10)
    with pytest.raises(KubeError) as err:
        api.get("/version")
    assert err.value.kind == "transport"
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)
    assert server.requests == []  # the handshake failed: no request, no Authorization header


def test_the_cluster_ca_is_accepted(server, system_store_trusts_the_server):
    api = KubeApi(server.endpoint, TOKEN, ca_data=tls().ca_data, timeout=10)
    assert api.get("/version") == {"major": "1", "minor": "35"}
    assert server.requests == [("GET", "/version", f"Bearer {TOKEN}")]


@pytest.mark.parametrize("ca_data", [None, ""])
def test_without_cluster_ca_data_nothing_is_sent(server, system_store_trusts_the_server, ca_data):
    api = KubeApi(server.endpoint, TOKEN, ca_data=ca_data, timeout=10)
    with pytest.raises(KubeError) as err:
        api.get("/version")
    assert err.value.kind == "endpoint" and "no certificate authority data" in str(err.value)
    assert server.connections == 0
