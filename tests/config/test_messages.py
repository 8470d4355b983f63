"""The validator's own wording where YAML typed a value the user meant as text, and where more problems follow."""

from __future__ import annotations

import pytest

from ..helpers import refusal as _refusal


@pytest.mark.parametrize(
    "change, field, said",
    [
        (
            {"cluster": {"kubernetes_version": 1.35}},
            "cluster.kubernetes_version",
            'YAML read it as a number: quote it, as "1.35"',
        ),
        (
            {"serving": {"upgrade_strategy": None}},
            "serving.upgrade_strategy",
            'YAML read it as null: quote it, as "None"',
        ),
    ],
)
def test_a_value_yaml_typed_is_told_to_be_quoted(tmp_path, change, field, said):
    line = _refusal(tmp_path, change)
    assert f": {field}: " in line and line.endswith(said)


def test_a_number_no_allowed_text_spells_gets_no_quoting_hint(tmp_path):
    line = _refusal(tmp_path, {"cluster": {"kubernetes_version": 1.29}})
    assert "is not allowed (allowed: '1.34' or '1.35')" in line and "quote" not in line


def test_pd_on_one_gpu_node_suggests_colocated_not_an_impossible_replica_count(tmp_path):
    line = _refusal(tmp_path, {"gpu_nodegroup": {"count": 1}})
    assert ": serving.prefill: prefill + decode need up to 2 GPUs" in line
    assert line.endswith("(allowed: serving.mode: colocated, one engine for both phases, or GPU nodes for 2 GPUs)")
