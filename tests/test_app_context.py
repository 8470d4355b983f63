"""app.py's CDK context (`stage`, `config_dir`, `nag`) comes from JSON (CDK_CONTEXT_JSON, cdk.json) or
`-c key=value` strings: a number, a list or an object where a name belongs, a path of another form, a nag
flag that is neither true nor false is one line naming the context key, exit 2, and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import app
from config.errors import short

from .helpers import ROOT, clean_env

# jsii prints a banner about the Node.js version on stderr (not the app's): silenced, so that stderr
# holds the app's own lines only.
QUIET_JSII = {
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": ",".join(str(v) for v in range(14, 40)),
    "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
    "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
    "JSII_SILENCE_WARNING_KNOWN_BROKEN_NODE_VERSION": "1",
}

STAGE = "is not a stage name (allowed: a <stage>.yaml's name: lowercase letters, digits and '-', e.g. -c stage=dev)"
CONFIG_DIR = "is not a folder path (allowed: the path of a folder of stage files, e.g. -c config_dir=config)"
NAG = "is not true or false (allowed: true, false, 1, 0, yes, no, e.g. -c nag=false)"

# (context, the one line)
BAD = [
    ({"stage": 5}, f"cdk context stage: 5 {STAGE}"),
    ({"stage": ["dev"]}, f"cdk context stage: <a list of 1 items> {STAGE}"),
    ({"stage": {"name": "dev"}}, f"cdk context stage: <a mapping of 1 keys> {STAGE}"),
    ({"stage": True}, f"cdk context stage: True {STAGE}"),
    ({"stage": 1.5}, f"cdk context stage: 1.5 {STAGE}"),
    ({"stage": "../etc"}, f"cdk context stage: '../etc' {STAGE}"),
    ({"stage": "/etc/passwd"}, f"cdk context stage: '/etc/passwd' {STAGE}"),
    ({"stage": ""}, f"cdk context stage: '' {STAGE}"),
    ({"stage": "Dev"}, f"cdk context stage: 'Dev' {STAGE}"),
    ({"stage": "dev\n"}, f"cdk context stage: 'dev\\n' {STAGE}"),
    ({"stage": "dev.yaml"}, f"cdk context stage: 'dev.yaml' {STAGE}"),
    ({"stage": "x" * 5000}, f"cdk context stage: {short('x' * 5000)} {STAGE}"),
    ({"config_dir": {}}, f"cdk context config_dir: <a mapping of 0 keys> {CONFIG_DIR}"),
    ({"config_dir": ["config"]}, f"cdk context config_dir: <a list of 1 items> {CONFIG_DIR}"),
    ({"config_dir": 7}, f"cdk context config_dir: 7 {CONFIG_DIR}"),
    ({"config_dir": False}, f"cdk context config_dir: False {CONFIG_DIR}"),
    ({"config_dir": ""}, f"cdk context config_dir: '' {CONFIG_DIR}"),
    ({"config_dir": "   "}, f"cdk context config_dir: '   ' {CONFIG_DIR}"),
    ({"config_dir": "conf\x00ig"}, f"cdk context config_dir: 'conf\\x00ig' {CONFIG_DIR}"),
    ({"nag": "maybe"}, f"cdk context nag: 'maybe' {NAG}"),
    ({"nag": 2}, f"cdk context nag: 2 {NAG}"),
    ({"nag": 1.5}, f"cdk context nag: 1.5 {NAG}"),  # (1.0 is JavaScript's 1: true)
    ({"nag": []}, f"cdk context nag: <a list of 0 items> {NAG}"),
    ({"nag": {"on": True}}, f"cdk context nag: <a mapping of 1 keys> {NAG}"),
    ({"nag": ""}, f"cdk context nag: '' {NAG}"),
    ({"stage": "dev", "nag": "maybe"}, f"cdk context nag: 'maybe' {NAG}"),
]
SUBPROCESS = [BAD[0], BAD[1], BAD[5], BAD[12], BAD[19], BAD[18]]  # the CDK CLI's way: the environment


def _run_app(context: dict, outdir):
    return subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(CDK_CONTEXT_JSON=json.dumps(context), CDK_OUTDIR=str(outdir), **QUIET_JSII),
        check=False,
    )


@pytest.mark.parametrize("context, line", SUBPROCESS, ids=[json.dumps(c)[:40] for c, _ in SUBPROCESS])
def test_app_py_exits_2_with_one_line_naming_the_key(context, line, tmp_path):
    outdir = tmp_path / "cdk.out"
    run = _run_app(context, outdir)
    assert run.returncode == 2, run.stderr[-2000:]
    assert run.stderr.splitlines() == [line]
    assert run.stdout == ""
    assert not outdir.exists() or not any(outdir.iterdir())


@pytest.mark.parametrize("context, line", BAD, ids=[json.dumps(c)[:40] for c, _ in BAD])
def test_main_exits_2_with_one_line_naming_the_key(context, line, tmp_path, capsys):
    outdir = tmp_path / "cdk.out"
    assert app.main(context=context, outdir=str(outdir)) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [line]
    assert not outdir.exists() or not any(outdir.iterdir())


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, True),
        (False, False),
        ("true", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("1", True),
        ("0", False),
        ("yes", True),
        ("no", False),
        (1, True),
        (0, False),
        (None, False),
    ],
)
def test_nag_accepts_what_cdk_json_and_dash_c_pass(value, expected):
    context = {"nag": value}
    assert app._context(context.get)[2] is expected


def test_a_stage_name_of_the_right_form_that_does_not_exist_is_the_loaders_line(tmp_path, capsys):
    assert app.main(context={"stage": "qa"}, outdir=str(tmp_path / "out")) == 2
    assert capsys.readouterr().err.strip().endswith("config/qa.yaml: (file): no stage named 'qa' (allowed: dev, prod)")


def test_absent_values_are_the_defaults():
    only, config_dir, nag = app._context({}.get)
    assert (only, str(config_dir), nag) == (None, str(app.CONFIG_DIR), False)
    assert app._context({"stage": "dev", "config_dir": "config"}.get)[:2] == ("dev", "config")
