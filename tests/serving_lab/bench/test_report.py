"""The comparison report from runs built in memory: the table's cells, the verdicts' thresholds, the
hardware in titles, the warnings, and nothing written when there is nothing to compare."""

from __future__ import annotations

import pytest

from serving_lab.bench import report
from serving_lab.bench.results import Hardware, ResultsError

from .runs import HARDWARE, make_run

PD = make_run(
    "pd",
    {"chat": {1: (200, 20, 5300), 16: (260, 21, 5600), 64: (400, 22, 6000)}},
    tokens_per_s={1: 48, 16: 700, 64: 2400},
)
COLOCATED = make_run(
    "colocated",
    {"chat": {1: (100, 20.5, 5200), 16: (180, 28, 7300), 64: (700, 40, 10900)}},
    tokens_per_s={1: 49, 16: 560, 64: 1500},
)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return out, report.compare(PD, COLOCATED, out).read_text()


def test_table_has_each_run_at_each_level_with_p50_p90_p99(written):
    _, text = written
    # TTFT p50/p90/p99 of the spread [0.9 .. 1.1] x 200: 200, 216, 219.6 -> formatted as whole ms.
    assert "| 1 | pd | 200 | 216 | 220 | 20.0 | 21.6 | 22.0 | 5,300 | 5,724 | 5,819 | 48.0 | 0.50 | 5 (0) |" in text
    assert "| 64 | colocated | 700 | 756 | 769 |" in text


def test_verdicts_name_who_is_ahead_where(written):
    _, text = written
    assert "- TTFT p50: **pd** ahead at concurrency 64; **colocated** ahead at concurrency 1, 16 " in text
    assert "- ITL p50: **pd** ahead at concurrency 16, 64 (pd/colocated = 0.55-0.98)" in text  # 20 vs 20.5 is a tie
    assert "- output throughput: **pd** ahead at concurrency 16, 64" in text


def test_header_names_hardware_model_image_and_client(written):
    _, text = written
    assert text.startswith("# Benchmark: pd vs colocated\n")
    assert "| hardware | 2 x g6.8xlarge (1 x L4, EFA x1) | 2 x g6.8xlarge (1 x L4, EFA x1) |" in text
    assert "| KV transfer | NIXL LIBFABRIC | none (prefill and decode on the same replica) |" in text
    assert "| client | aiperf 0.13.0 | aiperf 0.13.0 |" in text
    assert "| client overhead per request | not measured | not measured |" in text
    assert "Warning" not in text


def test_plots_are_pngs_linked_from_the_report(written):
    out, text = written
    for name in ("scaling-chat.png", "distributions-chat.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"![{name}]({name})" in text


def test_plot_titles_carry_hardware_and_note():
    note = make_run("pd", {"chat": {1: (1, 1, 1)}}, note="fake server")
    assert (
        report._title(note, COLOCATED, "chat") == "chat: pd vs colocated\n2 x g6.8xlarge (1 x L4, EFA x1), "
        "qwen3.5-9b\nfake server"
    )


def test_different_hardware_is_called_out(tmp_path):
    other = make_run(
        "colocated",
        {"chat": {1: (100, 20, 5200)}},
        hardware=Hardware(**{**HARDWARE.model_dump(), "instance_type": "g6e.8xlarge"}),
    )
    text = report.compare(PD, other, tmp_path).read_text()
    assert "> Warning: the two runs used different hardware" in text


def test_nothing_in_common_is_an_error_and_writes_nothing(tmp_path):
    other = make_run("colocated", {"long-prompt": {1: (100, 20, 5200)}})
    with pytest.raises(ResultsError, match="share no profile"):
        report.compare(PD, other, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _rehearsed(run, *override_lines):
    settings = {**run.settings, "ray_version": "2.58.0", "rehearsal": {"overrides": list(override_lines)}}
    return run.model_copy(update={"settings": settings})


def test_a_rehearsal_shows_the_kv_backend_its_override_set_not_the_stages():
    from serving_lab.rehearse.overrides import Override

    line = Override(
        path="applications[0].args.prefill_config.engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends",
        before=["LIBFABRIC"],
        after=["UCX"],
        reason="no EFA device on this host: NIXL over UCX (shared memory / TCP on one host)",
    ).line()
    assert report._kv(_rehearsed(PD, line)) == "NIXL UCX (rehearsal override; the stage's: LIBFABRIC)"


def test_a_rehearsal_without_a_backend_override_shows_the_stages_backend():
    assert report._kv(_rehearsed(PD)) == "NIXL LIBFABRIC"


def test_a_rehearsal_names_the_host_packages_instead_of_the_image_it_did_not_run():
    assert report._image(_rehearsed(PD)) == (
        "none: a rehearsal runs rehearsal/serve.lock's packages on the host (Ray 2.58.0); the stage's is "
        "`763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0`"
    )
    assert report._image(PD) == "`763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0`"
