"""`run_stage` with the rehearsal's adjustments: what reaches aiperf (the level's time bound, the client's
environment, for the calibration too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import CONFIG_DIR, load_stages
from serving_lab.bench import aiperf, calibration, runner


class Stop(aiperf.BenchError):
    pass


@pytest.fixture(scope="module")
def dev():
    (cfg,) = load_stages(CONFIG_DIR, only="dev")
    return cfg


def _capture(monkeypatch) -> list[tuple[list[str], dict]]:
    calls: list[tuple[list[str], dict]] = []

    def fake_run(argv, artifact_dir, env=None, timeout=None):
        calls.append((argv, env))
        raise Stop("stop after the first command")

    monkeypatch.setattr(aiperf, "run", fake_run)
    monkeypatch.setattr(aiperf, "version", lambda executable, env=None: "0.13.0")
    return calls


def test_a_level_time_bound_reaches_aiperf_with_the_request_timeout_as_grace(dev, monkeypatch, tmp_path):
    calls = _capture(monkeypatch)
    adjust = runner.Adjustments(
        levels=[16], requests_per_stream=2, level_seconds=45, client_env={"PYTHONPATH": "/tmp/rehearsal-site/bench"}
    )
    with pytest.raises(Stop):
        runner.run_stage(
            dev,
            url="http://127.0.0.1:8000",
            executable="/x/aiperf",
            out_dir=tmp_path,
            calibrate=False,
            adjust=adjust,
            progress=lambda line: None,
        )
    ((argv, env),) = calls
    option = {
        name: argv[argv.index(name) + 1]
        for name in ("--benchmark-duration", "--benchmark-grace-period", "--concurrency", "--request-count")
    }
    assert option == {
        "--benchmark-duration": "45",
        "--concurrency": "16",
        "--request-count": "32",
        "--benchmark-grace-period": str(dev.benchmark.request_timeout_seconds),
    }
    assert env == {"PYTHONPATH": "/tmp/rehearsal-site/bench"}


def test_without_a_time_bound_the_request_count_alone_ends_a_level(dev, monkeypatch, tmp_path):
    calls = _capture(monkeypatch)
    with pytest.raises(Stop):
        runner.run_stage(
            dev,
            url="http://127.0.0.1:8000",
            executable="/x/aiperf",
            out_dir=tmp_path,
            calibrate=False,
            progress=lambda line: None,
        )
    ((argv, _),) = calls
    assert "--benchmark-duration" not in argv and "--benchmark-grace-period" not in argv


def test_the_calibration_runs_aiperf_with_the_clients_environment(monkeypatch, tmp_path):
    # The first H200 run failed here: aiperf from the unpacked tree needs its PYTHONPATH for the
    # calibration as much as for the measured levels ("No module named 'aiperf'").
    calls = _capture(monkeypatch)
    with pytest.raises(Stop):
        calibration.measure("/x/aiperf", Path(tmp_path), concurrency=4, client_env={"PYTHONPATH": "/bench"})
    ((_, env),) = calls
    assert env["PYTHONPATH"] == "/bench" and env["HF_ENDPOINT"] == calibration.OFFLINE_ENV["HF_ENDPOINT"]
