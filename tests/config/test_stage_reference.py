"""docs/STAGE_FILE.md is what scripts/stage_reference.py generates from config/schema.py now, and every field of the
schema has a description (the page's Description column)."""

from __future__ import annotations

import importlib.util
import inspect
import sys

import pytest
from pydantic import BaseModel

import config.schema

from ..helpers import ROOT

SCRIPT = ROOT / "scripts" / "stage_reference.py"
PAGE = ROOT / "docs" / "STAGE_FILE.md"


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("stage_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def _models() -> list[type[BaseModel]]:
    """Every model config/schema.py defines (RoleEngine, made with create_model, included)."""
    return [
        value
        for value in vars(config.schema).values()
        if inspect.isclass(value) and issubclass(value, BaseModel) and value.__module__ == config.schema.__name__
    ]


def test_the_committed_page_is_what_the_generator_prints_now(generator):
    assert PAGE.is_file(), f"{PAGE} is missing: run .venv/bin/python scripts/stage_reference.py --write"
    assert PAGE.read_text() == generator.render(), (
        "docs/STAGE_FILE.md differs from config/schema.py: run .venv/bin/python scripts/stage_reference.py --write"
    )


def test_the_page_is_deterministic(generator):
    assert generator.render() == generator.render()


def test_every_field_of_the_schema_has_a_description():
    missing = [
        f"{model.__name__}.{name}"
        for model in _models()
        for name, info in model.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert missing == [], f"fields without Field(description=...): {missing}"


def test_every_model_of_the_schema_has_a_section_and_every_field_a_row(generator):
    sections = {section.model: section for section in generator.sections()}
    # nothing reachable but undocumented; nothing defined but unreachable, except bases of a section (Strict,
    # Replicas: their fields are rows of the sections built on them)
    assert set(sections) <= set(_models())
    unreachable = set(_models()) - set(sections)
    assert all(any(issubclass(model, base) for model in sections) for base in unreachable), unreachable
    page = generator.render()
    for model, section in sections.items():
        for name in model.model_fields:
            key = f"{section.title}.{name}" if section.title else name
            assert f"| `{key}` |" in page, key


def test_sections_found_at_several_paths_are_one_table(generator):
    titles = [section.title for section in generator.sections()]
    assert "serving.{prefill,decode}" in titles and "serving.{prefill,decode}.engine" in titles
    assert len(titles) == len(set(titles))


def test_check_fails_on_a_stale_page(generator, monkeypatch, tmp_path, capsys):
    stale = tmp_path / "STAGE_FILE.md"
    stale.write_text(generator.render().replace("| `stage` |", "| `stag` |"))
    monkeypatch.setattr(generator, "PAGE", stale)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    assert "differs from config/schema.py" in capsys.readouterr().err
    stale.write_text(generator.render())
    assert generator.main(["--check"]) == 0
