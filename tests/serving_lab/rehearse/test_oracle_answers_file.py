"""An oracle-answers file read back (--oracle-against, `python3 -m serving_lab.rehearse.oracle_run`): only the shape
_answers_file writes passes; anything else is one OracleError naming the file and the first wrong field, before the
engines start."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from serving_lab.rehearse import oracle_run

ANSWER = {"prompt": "p1", "token_ids": [5, 7], "top": [[[5, -0.1], [9, -2.5]], [[7, -0.2]]], "prompt_tokens": 12}
GOOD = {"mode": "colocated", "checkpoint": {"seed": 0, "tensors": 3, "bytes": 64}, "levels": {"1": [ANSWER]}}


def _file(tmp_path: Path, data) -> Path:
    path = tmp_path / "oracle-answers-colocated.json"
    path.write_text(json.dumps(data))
    return path


def _with(change: dict) -> dict:
    return {**GOOD, **change}


def test_the_written_shape_reads_back(tmp_path):
    mode, levels, fingerprint = oracle_run.read_answers(_file(tmp_path, GOOD))
    assert (mode, fingerprint) == ("colocated", {"seed": 0, "tensors": 3, "bytes": 64})
    assert levels[1][0].token_ids == [5, 7] and levels[1][0].top[0] == [(5, -0.1), (9, -2.5)]


@pytest.mark.parametrize(
    "data, problem",
    [
        (_with({"mode": "both"}), "mode: Input should be 'pd' or 'colocated'"),
        (_with({"checkpoint": "seed 0"}), "checkpoint: Input should be a valid dictionary"),  # was an AttributeError
        (_with({"levels": {"one": [ANSWER]}}), "levels.one.[key]: Input should be a valid integer"),
        (_with({"levels": {"1": [{**ANSWER, "token_ids": ["a"]}]}}), "levels.1.0.token_ids.0: Input should be"),
        (_with({"levels": {"1": [{**ANSWER, "top": [[[5]]]}]}}), "levels.1.0.top.0.0.1: Field required"),
        (_with({"extra": 1}), "extra: Extra inputs are not permitted"),
        ([GOOD], "the whole file: Input should be a valid dictionary"),
    ],
)
def test_any_other_shape_is_one_line_naming_the_field(tmp_path, data, problem):
    path = _file(tmp_path, data)
    with pytest.raises(oracle_run.OracleError) as info:
        oracle_run.read_answers(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not an oracle-answers file (") and problem in message, message
    assert "\n" not in message


def test_a_file_past_the_size_cap_is_refused_without_reading_it_all(tmp_path, monkeypatch):
    monkeypatch.setattr(oracle_run, "ANSWERS_MAX_BYTES", 64)
    with pytest.raises(oracle_run.OracleError, match=r"larger than 64 bytes: not an oracle-answers file$"):
        oracle_run.read_answers(_file(tmp_path, GOOD))


def test_the_offline_verdict_refuses_a_malformed_file_with_exit_2(tmp_path, capsys):
    bad = _file(tmp_path, _with({"mode": "both"}))
    assert oracle_run.main([str(bad), str(bad), str(tmp_path / "out"), "dev"]) == 2
    assert capsys.readouterr().err.startswith(f"oracle_run: {bad}: not an oracle-answers file (mode: ")


@pytest.mark.parametrize(
    "record, problem",
    [
        ("[1, 2]", "the whole file: Input should be a valid dictionary"),  # was an AttributeError, exit 3
        ('{"seed": "x"}', "seed: Input should be a valid integer"),
        ("{", "JSONDecodeError"),
    ],
)
def test_a_checkpoint_record_of_another_shape_is_one_line(tmp_path, record, problem):
    (tmp_path / "checkpoint.json").write_text(record)
    with pytest.raises(oracle_run.OracleError) as info:
        oracle_run.fingerprint(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / 'checkpoint.json'}: not a checkpoint record (")
    assert problem in str(info.value)


def test_a_checkpoint_record_keeps_its_identity_and_ignores_the_rest(tmp_path):
    (tmp_path / "checkpoint.json").write_text('{"seed": 1, "tensors": 2, "bytes": 3, "seconds": {"total": 9}}')
    assert oracle_run.fingerprint(tmp_path) == {"seed": 1, "tensors": 2, "bytes": 3, "folder": str(tmp_path)}


def test_json_nested_past_the_decoders_recursion_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    with pytest.raises(oracle_run.OracleError, match=r": not an oracle-answers file \(JSON nested too deeply\)$"):
        oracle_run.read_answers(path)
    (tmp_path / "checkpoint.json").write_text('{"a": ' * 100_000)
    with pytest.raises(oracle_run.OracleError, match=r": not a checkpoint record \(JSON nested too deeply\)$"):
        oracle_run.fingerprint(tmp_path)


def test_a_fifo_in_place_of_the_file_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "answers.json")
    with pytest.raises(oracle_run.OracleError, match=r"a FIFO \(named pipe\), not a regular file: not an oracle-answ"):
        oracle_run.read_answers(tmp_path / "answers.json")


@pytest.mark.parametrize("stage", ["../x", "a/b", "", "dev\n"])
def test_the_offline_verdicts_stage_names_a_file_in_out_and_nothing_else(tmp_path, capsys, stage):
    good = _file(tmp_path, GOOD)
    with pytest.raises(SystemExit) as info:
        oracle_run.main([str(good), str(good), str(tmp_path / "out"), stage])
    assert info.value.code == 2
    assert "error: argument STAGE: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_offline_verdict_refuses_a_fifo_where_it_would_write(tmp_path, capsys):
    good = _file(tmp_path, GOOD)
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "oracle-dev.json")
    with pytest.raises(SystemExit) as info:
        oracle_run.main([str(good), str(good), str(tmp_path / "out"), "dev"])
    assert info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]  # the path is cut to 40 characters (cli_options)
    assert last.startswith("python3 -m serving_lab.rehearse.oracle_run: error: OUT: /"), last
    assert last.endswith(": a FIFO (named pipe), not a regular file"), last
