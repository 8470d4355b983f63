"""`ops bench --merge`: one run of the levels that several commands measured on one deployment (a lent
GPU host's command lasts minutes, so a mode's profiles may take two), or a one-line error."""

from __future__ import annotations

import pytest

from ops.__main__ import main
from serving_lab.bench import results

from .runs import make_run


def _command(profiles, *, created_at, skipped=(), tokenizer="/tmp/rehearsal-model-a/model"):
    run = make_run("pd", profiles)
    return run.model_copy(
        update={
            "created_at": created_at,
            "settings": {
                **run.settings,
                "tokenizer": tokenizer,
                "rehearsal": {"levels": [1, 16, 64]},
                **({"skipped": list(skipped)} if skipped else {}),
            },
        }
    )


CHAT = _command(
    {"chat": {1: (100, 20, 900), 16: (150, 22, 1000)}},
    created_at="2026-12-01T10:00:00+00:00",
    skipped=["chat-c64", "long-prompt-c1", "long-prompt-c16", "long-prompt-c64"],
)
LONG = _command(
    {"long-prompt": {1: (300, 25, 1200), 16: (700, 30, 1500), 64: (1500, 40, 2000)}, "chat": {64: (400, 25, 1100)}},
    created_at="2026-12-01T10:20:00+00:00",
    tokenizer="/tmp/rehearsal-model-b/model",
)


def test_levels_of_two_commands_become_one_run_in_concurrency_order():
    merged = results.merge([CHAT, LONG])
    assert [(p.name, [level.concurrency for level in p.levels]) for p in merged.profiles] == [
        ("chat", [1, 16, 64]),
        ("long-prompt", [1, 16, 64]),
    ]
    assert merged.profile("chat").levels[2] == LONG.profile("chat").levels[0]


def test_what_a_later_command_measured_is_no_longer_skipped_and_the_sources_are_recorded():
    merged = results.merge([CHAT, LONG])
    assert "skipped" not in merged.settings
    assert merged.settings["merged_from"] == ["2026-12-01T10:00:00+00:00", "2026-12-01T10:20:00+00:00"]
    partial = results.merge([CHAT, _command({"long-prompt": {1: (300, 25, 1200)}}, created_at="x")])
    assert partial.settings["skipped"] == ["chat-c64", "long-prompt-c16", "long-prompt-c64"]


def test_a_level_measured_twice_is_refused():
    with pytest.raises(results.ResultsError, match="profile 'chat' at concurrency 16 is in two runs"):
        results.merge([CHAT, _command({"chat": {16: (1, 1, 1)}}, created_at="y")])


@pytest.mark.parametrize(
    "change,expected",
    [
        ({"mode": "colocated"}, "^mode differs"),
        ({"image": "other:tag"}, "^image differs"),
        ({"hardware": CHAT.hardware.model_copy(update={"gpu": "L4", "gpus_per_node": 4})}, "^hardware differs"),
        ({"settings": {**LONG.settings, "engine": {"max_model_len": 8192}}}, "^settings.engine differs"),
    ],
)
def test_runs_of_different_deployments_are_refused_naming_the_field(change, expected):
    with pytest.raises(results.ResultsError, match=expected):
        results.merge([CHAT, LONG.model_copy(update=change)])


def test_the_command_writes_the_merged_run(tmp_path, capsys):
    a, b = CHAT.save(tmp_path / "a.json"), LONG.save(tmp_path / "b.json")
    assert main(["bench", "--merge", str(a), str(b), "--out", str(tmp_path / "pd.json")]) == 0
    assert capsys.readouterr().out.strip() == f"merged: {tmp_path / 'pd.json'}"
    assert results.load(tmp_path / "pd.json") == results.merge([CHAT, LONG])


@pytest.mark.parametrize(
    "extra,expected",
    [
        ([], "bench --merge: --out: give the merged run's file name, e.g. --out pd.json"),
        (["--out", "merged"], "bench --merge: --out: give the merged run's file name, e.g. --out pd.json"),
    ],
)
def test_the_command_needs_an_output_file(tmp_path, capsys, extra, expected):
    a, b = CHAT.save(tmp_path / "a.json"), LONG.save(tmp_path / "b.json")
    assert main(["bench", "--merge", str(a), str(b), *extra]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [expected]


def test_a_mismatch_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    a = CHAT.save(tmp_path / "a.json")
    b = LONG.model_copy(update={"mode": "colocated"}).save(tmp_path / "b.json")
    assert main(["bench", "--merge", str(a), str(b), "--out", str(tmp_path / "pd.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench --merge: mode differs between the run of")
    assert not (tmp_path / "pd.json").exists()


@pytest.mark.parametrize("out", ["a.json", "./link.json"])
def test_the_merged_run_never_overwrites_one_of_its_runs(tmp_path, capsys, monkeypatch, out):
    a, b = CHAT.save(tmp_path / "a.json"), LONG.save(tmp_path / "b.json")
    (tmp_path / "link.json").symlink_to(a)  # the same file by another name
    before = a.read_bytes()
    monkeypatch.chdir(tmp_path)
    assert main(["bench", "--merge", str(a), str(b), "--out", out]) == 2
    assert capsys.readouterr().err.strip().endswith("is one of the runs to merge: name a new file")
    assert a.read_bytes() == before
