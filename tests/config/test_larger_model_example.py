"""docs/larger-model.example.yaml: the example stage of a model larger than one GPU (issue #55), tensor parallel over a
node's GPUs. Not a stage of config/: copied into a folder as <stage>.yaml, as a user would."""

from __future__ import annotations

import shutil

from config import load_stage_file
from config.derived import gpu_spec, model_memory_floor
from config.rules.serving_engine_tuning import tp_sizes

from ..helpers import ROOT

EXAMPLE = ROOT / "docs" / "larger-model.example.yaml"


def _load(tmp_path):
    path = tmp_path / "larger-model.yaml"
    shutil.copy(EXAMPLE, path)
    return load_stage_file(path, warn=lambda line: None)


def test_the_example_validates_with_each_engine_over_one_nodes_gpus(tmp_path):
    cfg = _load(tmp_path)
    assert cfg.serving.mode == "pd"
    for role in cfg.serving.engine_roles():
        assert cfg.serving.engine_for(role).tensor_parallel_size == gpu_spec(cfg).gpus == 4


def test_the_examples_model_needs_more_than_the_next_smaller_tp(tmp_path):
    # the point of the example: below TP 4 (TP 2; TP 3 does not split the heads) the weights do not fit the L4s
    cfg = _load(tmp_path)
    smaller = max(n for n in tp_sizes(cfg.serving.model.source, 4) if n < 4)
    engine = cfg.serving.engine.model_copy(update={"tensor_parallel_size": smaller})
    floor = model_memory_floor(cfg, engine)
    assert floor is not None and floor.needed_gib > floor.available_gib
