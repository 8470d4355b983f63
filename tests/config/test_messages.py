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
            "YAML read 1.35 as a number, not the text \"1.35\": quote it (allowed: '1.34' or '1.35')",
        ),
        (
            {"serving": {"upgrade_strategy": None}},
            "serving.upgrade_strategy",
            "YAML read the value as null, not the text \"None\": quote it (allowed: 'None' or 'NewCluster')",
        ),
    ],
)
def test_a_value_yaml_typed_is_told_to_be_quoted(tmp_path, change, field, said):
    line = _refusal(tmp_path, change)
    assert f": {field}: " in line and line.endswith(said)


def test_a_number_where_only_text_is_allowed_is_told_so(tmp_path):
    # `kubernetes_version: 1.30` arrives as 1.3: no allowed text spells it, but the cure is still the quotes
    line = _refusal(tmp_path, {"cluster": {"kubernetes_version": 1.3}})
    assert line.endswith(
        "YAML read 1.3 as a number, and only text is allowed: quote the value (allowed: '1.34' or '1.35')"
    )


def test_a_yaml_typed_value_never_reads_as_one_of_the_allowed(tmp_path):
    line = _refusal(tmp_path, {"cluster": {"kubernetes_version": 1.35}})
    assert "1.35 is not allowed" not in line


def test_text_that_is_not_allowed_is_said_plainly(tmp_path):
    line = _refusal(tmp_path, {"cluster": {"kubernetes_version": "1.29"}})
    assert line.endswith("'1.29' is not allowed (allowed: '1.34' or '1.35')") and "YAML" not in line


def test_pd_on_one_gpu_node_names_the_node_count_and_suggests_colocated(tmp_path):
    # one replica a side has none to give back: the count of GPU nodes is the setting, not serving.prefill
    line = _refusal(tmp_path, {"gpu_nodegroup": {"count": 1}})
    assert ": gpu_nodegroup.count: prefill + decode need up to 2 GPUs" in line
    assert line.endswith("(allowed: serving.mode: colocated, one engine for both phases, or GPU nodes for 2 GPUs)")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (["haproxy"], "YAML read <a list of 1 items> as a list: write one value"),
        ({"a": 1}, "YAML read <a mapping of 1 keys> as a mapping: write one value"),
    ],
)
def test_a_collection_where_one_text_value_is_allowed_is_named_as_what_it_is(tmp_path, value, said):
    line = _refusal(tmp_path, {"serving": {"serve_ingress": value}})
    assert line.endswith(f"{said} (allowed: 'serve_proxy' or 'haproxy')") and "as a number" not in line


def test_an_unquoted_date_where_text_is_allowed_is_named_a_date(tmp_path):
    import datetime

    line = _refusal(tmp_path, {"serving": {"serve_ingress": datetime.date(2026, 12, 5)}})
    assert "YAML read 2026-12-05 as a date, and only text is allowed: quote the value" in line


def test_a_value_quoted_whole_is_cut_in_the_message_and_a_long_path_is_not():
    from config.errors import WORD_MAX, ConfigError

    path = "/tmp/" + "d" * 300 + "/dev.yaml"  # a deep temporary folder: shown whole
    quoted = f"('{'x' * 10_000}')"
    error = ConfigError(path, "network.vpc_cidr", f"not an IPv4 network in CIDR form {quoted}")
    assert error.path == path
    assert error.problem == f"not an IPv4 network in CIDR form {quoted[:40]}... ({len(quoted) - 40} more characters)"
    assert len(str(error)) < len(path) + WORD_MAX


@pytest.mark.parametrize("written", ["2e0", "1e+308", "5e-324", "-7E5", "1e-3", "3.5e2"])
def test_the_float_a_hint_suggests_is_one_yaml_reads_as_that_number(tmp_path, written):
    import re

    import yaml

    line = _refusal(tmp_path, {"observability": {"ttft_p99_slo_seconds": written}})
    suggested = re.fullmatch(r".*write it with a point \(e\.g\. (\S+)\)", line)[1]
    assert yaml.safe_load(suggested) == float(written) and isinstance(yaml.safe_load(suggested), float)


def test_a_float_beyond_range_is_not_told_to_be_written_as_inf(tmp_path):
    line = _refusal(tmp_path, {"observability": {"ttft_p99_slo_seconds": "1e400"}})
    assert line.endswith("YAML 1.1 reads '1e400' as text, not a number, and it is beyond a float's range")
