"""Who can use kubectl: an empty cluster.admin_principal_arns (no person gets a cluster-admin access
entry) is refused unless cluster.allow_no_admin_principals: true says so on purpose; the opt-out together
with a list of admins is refused as a contradiction; the opt-out is a real boolean."""

from __future__ import annotations

import pytest

from config import ConfigError, load_stage_file
from config.__main__ import main
from config.loader import CONFIG_DIR

from ..helpers import DELETE, merge, stage_data, write_stage

ADMIN = "arn:aws:iam::123456789012:role/PlatformAdmin"


def _stage(tmp_path, cluster, stage="dev"):
    return write_stage(tmp_path, merge(stage_data(stage), {"cluster": cluster}), name=stage)


def _one_line(path, capsys):
    """The validator's exit code and its only stderr line."""
    code = main(["validate", str(path)])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return code, lines[0]


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_empty_list_without_the_opt_out_is_one_line_naming_file_and_field(stage, tmp_path, capsys):
    path = _stage(tmp_path, {"admin_principal_arns": [], "allow_no_admin_principals": DELETE}, stage)
    code, line = _one_line(path, capsys)
    assert code == 2
    assert line.startswith(f"{path}: cluster.admin_principal_arns: empty: "), line
    assert "nobody can use kubectl" in line
    # what to do: an admin role's ARN, or the explicit opt-out
    assert "your admin IAM role's ARN" in line and "cluster.allow_no_admin_principals: true" in line


def test_opt_out_false_is_the_same_as_unset(tmp_path):
    path = _stage(tmp_path, {"admin_principal_arns": [], "allow_no_admin_principals": False})
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    assert (caught.value.path, caught.value.field) == (str(path), "cluster.admin_principal_arns")


def test_empty_list_with_the_opt_out_is_valid(tmp_path):
    cfg = load_stage_file(_stage(tmp_path, {"admin_principal_arns": [], "allow_no_admin_principals": True}))
    assert cfg.cluster.admin_principal_arns == [] and cfg.cluster.allow_no_admin_principals is True


def test_a_list_of_admins_needs_no_opt_out(tmp_path):
    cfg = load_stage_file(_stage(tmp_path, {"admin_principal_arns": [ADMIN], "allow_no_admin_principals": DELETE}))
    assert cfg.cluster.admin_principal_arns == [ADMIN] and cfg.cluster.allow_no_admin_principals is False


def test_admins_and_the_opt_out_together_are_refused_as_contradictory(tmp_path, capsys):
    path = _stage(tmp_path, {"admin_principal_arns": [ADMIN], "allow_no_admin_principals": True})
    code, line = _one_line(path, capsys)
    assert code == 2
    assert line == (
        f"{path}: cluster.allow_no_admin_principals: true, but cluster.admin_principal_arns lists "
        "1 principal(s) that get cluster admin: the two contradict each other (allowed: false or "
        "unset when the list names admins; true only with an empty list)"
    )


@pytest.mark.parametrize(
    "value, shown",
    [("yes", "str 'yes'"), ("true", "str 'true'"), (1, "int 1"), (0, "int 0"), ("", "str ''"), (None, "NoneType None")],
)
def test_the_opt_out_is_a_real_boolean(value, shown, tmp_path, capsys):
    path = _stage(tmp_path, {"admin_principal_arns": [], "allow_no_admin_principals": value})
    code, line = _one_line(path, capsys)
    assert code == 2
    assert line == f"{path}: cluster.allow_no_admin_principals: expected boolean, got {shown}"


def test_a_quoted_true_in_the_yaml_text_is_refused(tmp_path, capsys):
    text = (
        (CONFIG_DIR / "dev.yaml")
        .read_text()
        .replace("allow_no_admin_principals: true", 'allow_no_admin_principals: "true"')
    )
    assert 'allow_no_admin_principals: "true"' in text
    path = write_stage(tmp_path, text, name="dev")
    code, line = _one_line(path, capsys)
    assert (code, line) == (2, f"{path}: cluster.allow_no_admin_principals: expected boolean, got str 'true'")


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_shipped_stage_files_opt_out_explicitly(stage):
    """They name no admin (no account's ARN ships as if real), and say so with the field: the docs'
    "First deploy" section tells the operator to replace it with their admin role."""
    cluster = stage_data(stage)["cluster"]
    assert cluster["admin_principal_arns"] == [] and cluster["allow_no_admin_principals"] is True
    assert load_stage_file(CONFIG_DIR / f"{stage}.yaml").cluster.allow_no_admin_principals is True
