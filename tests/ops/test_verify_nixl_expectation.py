"""`verify`'s NIXL check judges the workers' logs against the transport the stage expects: EFA on an EFA
stage (unchanged), TCP without EFA (gpu_nodegroup.efa: false): UCX when serving.kv_backend is UCX, else
libfabric's tcp provider. Without EFA the check passes on those lines and says they are expected, and it
fails (with advice that does not send the operator after EFA) when NIXL did not start at all or runs
another backend than the stage's."""

from __future__ import annotations

import pytest

from clients import nixl
from ops import verify

from ..helpers import config_with
from .fake_cluster import FIXTURES, FakeCluster, Scenario

IPS = ("10.0.40.17", "10.0.41.9")
NO_NIXL = (
    "INFO 11-30 04:12:03 [api_server.py:1523] Starting vLLM API server\n"
    "INFO 11-30 04:12:09 [loader.py:458] Loading weights took 41.2 seconds\n"
)


def _nixl_check(cfg, logs):
    """The NIXL transport check of a verify run whose workers' log files are `logs` (fixture names or
    absolute paths, one per worker)."""
    with FakeCluster(Scenario(worker_logs=dict(zip(IPS, logs, strict=True)))) as fake:
        report = verify.run(cfg, fake.api(), progress=lambda *a: None)
    check = report.find("NIXL transport")
    assert check is not None, [c.name for c in report.checks]
    return check


@pytest.fixture
def no_nixl_log(tmp_path):
    path = tmp_path / "no-nixl.log"
    path.write_text(NO_NIXL)
    assert nixl.classify(NO_NIXL).verdict == "no-nixl"
    return str(path)  # absolute: the fake cluster reads FIXTURES / name, which is then this path


@pytest.fixture
def ucx_stage(tmp_path):
    return config_with(
        tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_backend": "UCX", "kv_transfer_floor_gbps": 1}
    )


@pytest.fixture
def tcp_stage(tmp_path):
    return config_with(
        tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_backend": "LIBFABRIC", "kv_transfer_floor_gbps": 1}
    )


@pytest.mark.parametrize(
    "efa, backend, expected", [(True, "LIBFABRIC", "efa"), (False, "UCX", "ucx"), (False, "LIBFABRIC", "tcp")]
)
def test_the_expected_transport_follows_efa_and_the_kv_backend(efa, backend, expected):
    assert nixl.expected_transport(efa, backend) == expected


# --- efa: false, serving.kv_backend: UCX ----------------------------------------------------------------


def test_ucx_passes_without_efa_and_says_it_is_expected(ucx_stage):
    check = _nixl_check(ucx_stage, ["ucx.log", "ucx.log"])
    assert check.status == "pass", check
    assert check.detail == ("10.0.40.17: UCX, as expected without EFA; 10.0.41.9: UCX, as expected without EFA")
    assert check.data["verdicts"] == {"10.0.40.17": "ucx", "10.0.41.9": "ucx"}


def test_without_efa_nixl_that_did_not_start_fails_with_advice_to_wait_not_to_fix_efa(ucx_stage, no_nixl_log):
    check = _nixl_check(ucx_stage, [no_nixl_log, "ucx.log"])
    assert check.status == "fail"
    assert check.detail == (
        "worker 10.0.40.17: no NIXL lines in the worker's logs: the KV connector has not "
        "started (with efa: false it should start UCX, over TCP)"
    )
    assert check.fix.startswith("wait until the prefill and decode engines have started")
    assert "EFA" not in check.fix and "efa" not in check.fix
    assert check.data["verdicts"] == {"10.0.40.17": "no-nixl", "10.0.41.9": "ucx"}


def test_libfabric_on_a_ucx_stage_fails_as_another_backend(ucx_stage):
    check = _nixl_check(ucx_stage, ["ucx.log", "tcp.log"])
    assert check.status == "fail"
    assert check.detail == "worker 10.0.41.9: NIXL instantiated the LIBFABRIC backend, but serving.kv_backend is UCX"
    assert check.fix == (
        "the running engines do not use serving.kv_backend UCX: deploy the stage (cdk deploy) so "
        "the RayService's kv_transfer_config names backends [UCX]"
    )


def test_a_missing_plugin_of_another_backend_does_not_fail_a_ucx_stage():
    text = (FIXTURES / "missing-plugin.log").read_text() + (FIXTURES / "ucx.log").read_text()
    assert nixl.classify(text).verdict == "missing-plugin"  # on EFA it still fails
    finding = nixl.classify(text, "ucx")
    assert (finding.verdict, finding.ok, finding.detail) == ("ucx", True, "UCX, as expected without EFA")
    missing_ucx = text.replace("registration for LIBFABRIC", "registration for UCX")
    assert nixl.classify(missing_ucx, "ucx").verdict == "missing-plugin"
    assert not nixl.classify(missing_ucx, "ucx").ok


# --- efa: false, serving.kv_backend: LIBFABRIC ------------------------------------------------------------


def test_libfabric_on_tcp_passes_without_efa_and_says_it_is_expected(tcp_stage):
    check = _nixl_check(tcp_stage, ["tcp.log", "tcp.log"])
    assert check.status == "pass", check
    assert check.detail == (
        "10.0.40.17: LIBFABRIC on provider=tcp, as expected without EFA (1 rails); "
        "10.0.41.9: LIBFABRIC on provider=tcp, as expected without EFA (1 rails)"
    )


def test_libfabric_without_its_provider_line_passes_without_efa(tcp_stage):
    check = _nixl_check(tcp_stage, ["no-provider-line.log", "tcp.log"])
    assert check.status == "pass", check
    assert check.detail.startswith(
        "10.0.40.17: LIBFABRIC, as expected without EFA (its provider is not logged: NIXL_LOG_LEVEL is not INFO); "
    )


def test_ucx_on_a_libfabric_stage_without_efa_fails_as_another_backend(tcp_stage):
    check = _nixl_check(tcp_stage, ["tcp.log", "ucx.log"])
    assert check.status == "fail"
    assert check.detail == "worker 10.0.41.9: NIXL instantiated the UCX backend, but serving.kv_backend is LIBFABRIC"
    assert check.fix.endswith("names backends [LIBFABRIC]")


def test_without_efa_a_missing_libfabric_plugin_still_fails(tcp_stage):
    check = _nixl_check(tcp_stage, ["missing-plugin.log", "tcp.log"])
    assert check.status == "fail" and check.detail.startswith("worker 10.0.40.17: a NIXL plugin is missing: ")
    assert check.fix == "use the DLC image (unset serving.image), or an image whose NIXL has the LIBFABRIC plugin"


def test_without_efa_nixl_that_did_not_start_fails_on_a_libfabric_stage_too(tcp_stage, no_nixl_log):
    check = _nixl_check(tcp_stage, [no_nixl_log, no_nixl_log])
    assert check.status == "fail"
    assert check.detail == (
        "worker 10.0.40.17: no NIXL lines in the worker's logs: the KV connector has not "
        "started (with efa: false it should start LIBFABRIC, over TCP) (and 1 more)"
    )


# --- efa: true: as before --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "log, detail",
    [
        (
            "ucx.log",
            "NIXL instantiated the UCX backend: on EFA it runs at TCP speed (set serving.kv_backend: LIBFABRIC)",
        ),
        (
            "tcp.log",
            (
                "libfabric runs on provider=tcp, not efa: no usable EFA device in the pod (check "
                "vpc.amazonaws.com/efa requests and the EFA device plugin)"
            ),
        ),
        (
            "no-provider-line.log",
            (
                "LIBFABRIC was instantiated but no 'Created N rails using provider=' line: is "
                "NIXL_LOG_LEVEL=INFO set? EFA is not proven"
            ),
        ),
    ],
)
def test_with_efa_anything_but_efa_still_fails_with_the_efa_advice(dev, log, detail):
    assert dev.gpu_nodegroup.efa is True
    check = _nixl_check(dev, ["efa.log", log])
    assert (check.status, check.detail) == ("fail", f"worker 10.0.41.9: {detail}")
    assert check.fix == "see docs/OPERATIONS.md: what each NIXL failure means"


def test_with_efa_nixl_that_did_not_start_fails_as_before(dev, no_nixl_log):
    check = _nixl_check(dev, ["efa.log", no_nixl_log])
    assert (check.status, check.detail) == (
        "fail",
        "worker 10.0.41.9: no NIXL lines in the worker's logs (the KV connector has not started)",
    )
    assert check.fix == "see docs/OPERATIONS.md: what each NIXL failure means"
