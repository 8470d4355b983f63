"""First-day friction: a gated model without serving.hf_token_secret is refused (one line naming the file and the
field, saying how to fix it); a serving.model.id that names another model than serving.model.source is warned
about (one line on stderr, the exit code unchanged)."""

from __future__ import annotations

import pytest

from config import ConfigError, load_stage_file
from config.derived import KNOWN_MODELS, is_gated
from config.rules.serving_model import model_id_mismatch

from ..helpers import config_with, merge, stage_data, write_stage

TOKEN = {"hf_token_secret": "pd-inference/hf-token"}
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


# --- gated models -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "gated"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", True),
        ("meta-llama/llama-3.1-8b-instruct", True),  # the Hub resolves ids case-insensitively
        ("Meta-Llama/Meta-Llama-3.1-70B", True),
        ("someone/Llama-3.1-8B-Instruct", False),  # another organisation's copy: its own repository
        ("Qwen/Qwen3.5-9B", False),
        ("meta-llama/Llama-4-unknown", False),  # not in the table: not known to be gated
    ],
)
def test_gated_is_the_tables_mark_under_its_own_organisation(source, gated):
    assert is_gated(source) is gated


def test_the_table_marks_meta_llamas_llama_and_no_qwen():
    marked = {key for key, known in KNOWN_MODELS.items() if known.gated_org}
    assert marked == {key for key in KNOWN_MODELS if "llama" in key}
    assert all(KNOWN_MODELS[key].gated_org == "meta-llama" for key in marked)


def test_a_gated_model_without_a_token_secret_is_refused_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "config").mkdir()
    data = merge(stage_data("dev"), {"serving": {"model": {"id": "llama-3.1-8b-instruct", "source": LLAMA}}})
    write_stage(tmp_path / "config", data, name="dev")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_stage_file("config/dev.yaml")
    line = str(caught.value)
    assert line.startswith(
        f"config/dev.yaml: serving.hf_token_secret: unset, but {LLAMA} is a gated Hugging Face model"
    )
    assert "\n" not in line
    assert "Secrets Manager secret" in line and 'docs/OPERATIONS.md, "Hugging Face token secret"' in line


def test_a_gated_model_with_a_token_secret_is_accepted(tmp_path):
    serving = {"model": {"id": "llama-3.1-8b-instruct", "source": LLAMA}, **TOKEN}
    assert config_with(tmp_path, serving=serving).serving.hf_token_secret == TOKEN["hf_token_secret"]


def test_the_operations_doc_has_the_section_the_refusal_names():
    from ..helpers import ROOT

    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    assert "## Hugging Face token secret" in text
    assert "aws secretsmanager create-secret" in text


# --- serving.model.id against serving.model.source -----------------------------------------------------------


@pytest.mark.parametrize(
    ("model_id", "source"),
    [
        ("qwen3.5-9b", "Qwen/Qwen3.5-9B"),
        ("Qwen3.5-9B", "Qwen/Qwen3.5-9B"),
        ("qwen3_5_9b", "Qwen/Qwen3.5-9B"),
        ("qwen-qwen3.5-9b", "Qwen/Qwen3.5-9B"),  # organisation + name
        ("llama-3.1-8b-instruct", LLAMA),
    ],
)
def test_an_id_that_names_the_source_is_no_warning(tmp_path, model_id, source):
    cfg = config_with(tmp_path, serving={"model": {"id": model_id, "source": source}, **TOKEN})
    assert model_id_mismatch(cfg) is None


@pytest.mark.parametrize(
    ("model_id", "source"),
    [
        ("qwen3.5-9b", LLAMA),  # the id left over from the model before
        ("qwen3.5-27b", "Qwen/Qwen3.5-9B"),
        ("chat", "Qwen/Qwen3.5-9B"),  # an alias: warned about too (it does not say which model answers)
    ],
)
def test_an_id_that_names_another_model_is_warned_about_in_one_line(tmp_path, capsys, model_id, source):
    path = write_stage(
        tmp_path, merge(stage_data("dev"), {"serving": {"model": {"id": model_id, "source": source}, **TOKEN}})
    )
    warned: list[str] = []
    load_stage_file(path, warn=warned.append)
    (line,) = warned
    assert line.startswith(f"{path}: serving.model.id: warning: '{model_id}' names another model than ")
    assert "\n" not in line and "(fix: id: " in line
    assert capsys.readouterr().err == ""  # given a `warn`, nothing else is printed


def test_the_warning_goes_to_stderr_and_validate_still_exits_0(tmp_path, capsys):
    from config.__main__ import main

    path = write_stage(tmp_path, merge(stage_data("dev"), {"serving": {"model": {"id": "qwen3.5-27b"}}}))
    assert main(["validate", str(path)]) == 0
    captured = capsys.readouterr()
    (line,) = [w for w in captured.err.splitlines() if ": serving.model.id: " in w]
    assert line.startswith(f"{path}: serving.model.id: warning: 'qwen3.5-27b' names another model")
    assert captured.out.startswith(f"{path}: ok: ")


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_committed_stages_load_without_a_warning(stage):
    from config.loader import CONFIG_DIR

    warned: list[str] = []
    load_stage_file(CONFIG_DIR / f"{stage}.yaml", warn=warned.append)
    assert warned == []
