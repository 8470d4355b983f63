"""config/loader.py: libyaml reads a stage file, PyYAML's own parser words a fault."""

from __future__ import annotations

import pytest
import yaml

from config import ConfigError, load_stage_file
from config.loader import CONFIG_DIR, _FastStrictLoader, _load, _StrictLoader

from ..helpers import ROOT


@pytest.mark.parametrize(
    "path", sorted(CONFIG_DIR.glob("*.yaml")) + sorted((ROOT / "docs").glob("*.yaml")), ids=lambda p: p.name
)
def test_both_parsers_read_every_committed_file_alike(path):
    text = path.read_text()
    assert _load(str(path), text, _FastStrictLoader) == _load(str(path), text, _StrictLoader)


def test_the_fast_parser_is_libyamls():
    assert issubclass(_FastStrictLoader, yaml.CSafeLoader)


def test_a_syntax_fault_is_worded_by_pyyamls_parser(tmp_path):
    # libyaml says only "found character that cannot start any token"; PyYAML names the character.
    path = tmp_path / "dev.yaml"
    path.write_text("stage: dev\nregion: @us-west-2\n")
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert str(caught.value) == (
        f"{path}: (file): not valid YAML: found character '@' that cannot start any token at line 2, column 9"
    )
