"""The comparison report from runs built in memory: the table's cells, the verdicts' thresholds, the
hardware in titles, the warnings, and nothing written when there is nothing to compare."""

from __future__ import annotations

import re
import time

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
        "none: a rehearsal runs serving_lab/pins/serve.lock's packages on the host (Ray 2.58.0); the stage's is "
        "`763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0`"
    )
    assert report._image(PD) == "`763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0`"


# What a results file could carry into the report (it is data from wherever the run was made).
HOSTILE = {
    "label": "pd<script>alert(1)</script>|x",
    "note": "see [here](javascript:alert(1)) <img src=x onerror=alert(1)>\n# injected heading",
    "stage": "dev|extra cell",
    "model_id": "m`code`*bold*_em_",
    "image": "evil`|<b>`image",
    "endpoint": "<javascript:alert(1)>",
}


def _hostile():
    engine = {**PD.settings["engine"], "dtype": "bf16\n| forged | row |"}
    return PD.model_copy(update={**HOSTILE, "settings": {**PD.settings, "engine": engine}})


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_strings_from_a_results_file_are_escaped_in_the_markdown():
    noted = PD.model_copy(update={"note": "a note"})  # the hostile run has one: its lines are counted too
    plain = report.markdown(noted, COLOCATED, report.shared_levels(noted, COLOCATED), {})
    hostile = _hostile()
    text = report.markdown(hostile, COLOCATED, report.shared_levels(hostile, COLOCATED), {})
    assert len(text.splitlines()) == len(plain.splitlines())  # no line break of the file's own
    assert not re.search(r"(?<!\\)\]\(javascript:", text)  # no [link](javascript:...)
    for raw in ("<script", "<img", "<javascript", "`code`", "*bold*", "_em_"):
        assert raw not in text, raw
    assert "pd&lt;script&gt;alert(1)&lt;/script&gt;\\|x" in text
    for line_plain, line_hostile in zip(plain.splitlines(), text.splitlines(), strict=True):
        if line_plain.startswith("|"):  # every table row keeps its cells
            assert _unescaped_pipes(line_hostile) == _unescaped_pipes(line_plain), line_hostile
    image_row = next(line for line in text.splitlines() if line.startswith("| image |"))
    assert image_row.startswith("| image | `evil'\\|<b>'image` |")  # a code span: nothing in it is markup


def test_md_escapes_markup_and_line_breaks():
    # line breaks and other control characters as their escapes (clients/text.py shown), the backslash escaped
    assert report.md("a|b\n<i>[x](y)</i> `c` & \u2028d") == (
        "a\\|b\\\\x0a&lt;i&gt;\\[x\\](y)&lt;/i&gt; \\`c\\` &amp; \\\\u2028d"
    )


def test_plots_take_a_label_with_dollar_signs_as_text(tmp_path):
    # matplotlib reads $...$ as mathtext: an unknown command there would fail the figure
    odd = PD.model_copy(update={"label": "pd $\\notacommand$"})
    assert report.compare(odd, COLOCATED, tmp_path).is_file()


# --- a label from a results file is bounded before it reaches the plots or the text (issue #52) -------------


@pytest.mark.parametrize("field", ["label", "note", "model_id"])
def test_a_two_megabyte_string_is_cut_to_the_bound_before_the_plots_and_the_report(tmp_path, field):
    huge = "x" * 2_000_000
    run = PD.model_copy(update={field: huge})
    started = time.perf_counter()
    path = report.compare(run, COLOCATED, tmp_path)
    elapsed = time.perf_counter() - started
    text = path.read_text()
    cut = f"{'x' * report.SHOWN_CHARS}... ({2_000_000 - report.SHOWN_CHARS} more characters)"
    assert cut in text and huge[: report.SHOWN_CHARS + 1] not in text
    assert all(len(line) < 1000 for line in report._title(run, COLOCATED, "chat").splitlines())
    assert elapsed < 60, elapsed  # the plots laid out the whole string before: minutes


def test_control_characters_of_a_label_are_escaped_in_the_plots_titles():
    run = PD.model_copy(update={"label": "pd\x1b[2J\r\u202eevil"})
    title = report._title(run, COLOCATED, "chat")
    assert "pd\\x1b[2J\\x0d\\u202eevil vs colocated" in title and "\x1b" not in title and "\r" not in title
