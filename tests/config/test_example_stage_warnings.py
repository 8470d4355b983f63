"""The example stages as shipped are valid but not usable as they are: validate says so, one line each, with what
to put there (the README's "Configure a stage" table names the same keys)."""

from __future__ import annotations

import pytest

from config import load_stage_file
from config.__main__ import main
from config.loader import CONFIG_DIR
from config.rules import placeholder_warnings
from config.rules.cluster import no_admin_principal, placeholder_endpoint_cidrs

from ..helpers import config_with


def _warned(stage: str) -> dict[str, str]:
    path = str(CONFIG_DIR / f"{stage}.yaml")
    lines = placeholder_warnings(load_stage_file(path, warn=lambda line: None), path)
    return {line.split(": ")[1]: line for line in lines}


def test_validate_prints_them_and_still_exits_0(capsys):
    assert main(["validate", str(CONFIG_DIR)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[1] for line in err] == [
        "cluster.admin_principal_arns",
        "cluster.endpoint.public_access_cidrs",
        "cluster.admin_principal_arns",
    ]


def test_loading_a_stage_does_not_print_them(capsys):
    load_stage_file(CONFIG_DIR / "dev.yaml")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_a_stage_without_an_admin_says_who_to_put_there(stage):
    line = _warned(stage)["cluster.admin_principal_arns"]
    assert line.startswith(f"{CONFIG_DIR / stage}.yaml: cluster.admin_principal_arns: warning: empty: ")
    assert "put your admin IAM role's ARN there" in line and "\n" not in line


def test_the_documentation_range_of_dev_says_what_to_put_there():
    line = _warned("dev")["cluster.endpoint.public_access_cidrs"]
    assert "198.51.100.0/24 is a documentation range (RFC 5737)" in line and "egress ranges" in line


def test_a_private_endpoint_is_not_warned_about_its_cidrs():
    assert "cluster.endpoint.public_access_cidrs" not in _warned("prod")


@pytest.mark.parametrize("cidr", ["192.0.2.0/24", "203.0.113.7/32", "198.51.100.128/25"])
def test_every_documentation_range_is_warned_about(tmp_path, cidr):
    cfg = config_with(tmp_path, cluster={"endpoint": {"public_access_cidrs": [cidr]}})
    assert placeholder_endpoint_cidrs(cfg)


@pytest.mark.parametrize("cidr", ["52.94.76.0/22", "198.51.99.0/24"])
def test_a_real_range_is_not(tmp_path, cidr):
    cfg = config_with(tmp_path, cluster={"endpoint": {"public_access_cidrs": [cidr]}})
    assert placeholder_endpoint_cidrs(cfg) is None


def test_an_admin_principal_ends_the_warning(tmp_path):
    cfg = config_with(
        tmp_path,
        cluster={"admin_principal_arns": ["arn:aws:iam::123456789012:role/admin"], "allow_no_admin_principals": False},
    )
    assert no_admin_principal(cfg) is None
