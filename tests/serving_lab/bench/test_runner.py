"""`run_stage` with the rehearsal's adjustments: what reaches aiperf (the level's time bound, the client's
environment, for the calibration too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import CONFIG_DIR, load_stages
from serving_lab.bench import aiperf, calibration, results, runner


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


def _until_the_first_command(cfg, tmp_path: Path, adjust: runner.Adjustments | None = None) -> None:
    """run_stage until its first aiperf command, which _capture records and stops."""
    with pytest.raises(Stop):
        runner.run_stage(
            cfg,
            url="http://127.0.0.1:8000",
            executable="/x/aiperf",
            out_dir=tmp_path,
            calibrate=False,
            progress=lambda line: None,
            adjust=adjust or runner.Adjustments(),
        )


def test_a_level_time_bound_reaches_aiperf_with_the_request_timeout_as_grace(dev, monkeypatch, tmp_path):
    calls = _capture(monkeypatch)
    adjust = runner.Adjustments(
        levels=[16], requests_per_stream=2, level_seconds=45, client_env={"PYTHONPATH": "/tmp/rehearsal-site/bench"}
    )
    _until_the_first_command(dev, tmp_path, adjust)
    ((argv, env),) = calls
    option = {
        name: argv[argv.index(name) + 1]
        for name in ("--benchmark-duration", "--benchmark-grace-period", "--concurrency", "--request-count")
    }
    assert option == {
        "--benchmark-duration": "45",
        "--concurrency": "16",
        "--request-count": "100",  # 16 streams x 2 requests each, raised to a level's least (MIN_LEVEL_REQUESTS)
        "--benchmark-grace-period": str(dev.benchmark.request_timeout_seconds),
    }
    assert env == {"PYTHONPATH": "/tmp/rehearsal-site/bench"}


@pytest.mark.parametrize(
    ("streams", "per_stream", "least", "count"),
    [(1, 8, 100, "100"), (16, 8, 100, "128"), (4, 8, 10, "32"), (1, 8, 10, "16")],
)
def test_a_concurrency_level_sends_at_least_its_least_request_count(
    dev, monkeypatch, tmp_path, streams, per_stream, least, count
):
    # the level's count: the profile's (max(16, streams x per stream), config/schema.py), raised to min_requests
    calls = _capture(monkeypatch)
    adjust = runner.Adjustments(levels=[streams], requests_per_stream=per_stream, min_requests=least)
    _until_the_first_command(dev, tmp_path, adjust)
    ((argv, _),) = calls
    assert argv[argv.index("--request-count") + 1] == count


def test_without_a_time_bound_the_request_count_alone_ends_a_level(dev, monkeypatch, tmp_path):
    calls = _capture(monkeypatch)
    _until_the_first_command(dev, tmp_path)
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


# --- the request-rate sweep: one aiperf run per rate, open loop ------------------------------------------

from . import records
from .records import Request


def _answering(monkeypatch) -> list[list[str]]:
    """aiperf.run that writes a level's artifacts (records.py) instead of running aiperf: the run goes on."""
    calls: list[list[str]] = []

    def fake_run(argv, artifact_dir, env=None, timeout=None):
        calls.append(argv)
        requests = [Request(i * 100, i * 100 + 500, ttft_ms=100 + 200 * i, itl_ms=20) for i in range(16)]
        return records.write(artifact_dir, requests)

    monkeypatch.setattr(aiperf, "run", fake_run)
    monkeypatch.setattr(aiperf, "version", lambda executable, env=None: "0.13.0")
    return calls


def _options(argv: list[str]) -> dict:
    """Each `--name value` of a command line (flags without a value left out)."""
    return {
        name: value
        for name, value in zip(argv, [*argv[1:], ""], strict=True)
        if name.startswith("--") and value and not value.startswith("--")
    }


def test_each_request_rate_is_one_open_loop_aiperf_run_after_the_concurrency_levels(dev, monkeypatch, tmp_path):
    calls = _answering(monkeypatch)
    profile = dev.benchmark.profiles[0].model_copy(update={"concurrency": [4], "request_rates": [0.5, 2.0]})
    cfg = dev.model_copy(update={"benchmark": dev.benchmark.model_copy(update={"profiles": [profile]})})
    _, path = runner.run_stage(
        cfg,
        url="http://127.0.0.1:8000",
        executable="/x/aiperf",
        out_dir=tmp_path,
        calibrate=False,
        progress=lambda line: None,
    )
    assert len(calls) == 3  # concurrency 4, then 0.5 and 2 requests/s
    closed, slow, fast = (_options(argv) for argv in calls)
    assert closed["--concurrency"] == "4" and "--request-rate" not in closed
    for options, rate, count, warmup in ((slow, "0.5", "30", "1"), (fast, "2", "120", "2")):
        assert "--concurrency" not in options  # open loop: nothing caps the requests in flight
        assert (options["--request-rate"], options["--arrival-pattern"]) == (rate, "poisson")
        assert (options["--request-count"], options["--warmup-request-count"]) == (count, warmup)  # 60 s of arrivals
    for options in (closed, slow, fast):  # aiperf's own goodput under the stage's objectives, for the cross-check
        assert options["--goodput"] == "time_to_first_token:2000 inter_token_latency:100"
    assert [argv[argv.index("--artifact-dir") + 1] for argv in calls] == [
        str(path.with_suffix("") / name) for name in ("chat-c4", "chat-r0.5", "chat-r2")
    ]
    (saved,) = results.load(path).profiles
    assert [level.concurrency for level in saved.levels] == [4]
    assert [(level.request_rate, level.arrival) for level in saved.rate_levels] == [(0.5, "poisson"), (2.0, "poisson")]
    # TTFT 100, 300, ... 3100 ms: the first 10 are within 2 s; 16 requests span 0 to 2000 ms
    assert {(level.goodput.good, level.goodput.duration_s) for level in (*saved.levels, *saved.rate_levels)} == {
        (10, 2.0)
    }
    assert saved.rate_levels[0].max_inflight == 5  # 500 ms each, one every 100 ms
    assert results.load(path).settings["slo"] == {"ttft_seconds": 2.0, "itl_seconds": 0.1}


def test_the_command_lines_rates_and_sweep_choose_the_levels(dev, monkeypatch, tmp_path):
    calls = _answering(monkeypatch)
    adjust = runner.Adjustments(levels=[], request_rates=[8.0], rate_seconds=2)
    run, _ = runner.run_stage(
        dev,
        url="http://127.0.0.1:8000",
        executable="/x/aiperf",
        out_dir=tmp_path,
        calibrate=False,
        adjust=adjust,
        progress=lambda line: None,
    )
    # both profiles, only the rate given, max(16, 8 x 2) requests each
    assert [(_options(argv)["--request-rate"], _options(argv)["--request-count"]) for argv in calls] == [
        ("8", "16")
    ] * 2
    assert all(not profile.levels and len(profile.rate_levels) == 1 for profile in run.profiles)
    with pytest.raises(aiperf.BenchError, match=r"^no profile of stage dev has a level to run"):
        runner.run_stage(
            dev,
            url="http://127.0.0.1:8000",
            executable="/x/aiperf",
            out_dir=tmp_path,
            calibrate=False,
            adjust=runner.Adjustments(levels=[], request_rates=[]),
            progress=lambda line: None,
        )
