"""Every number option of `python -m ops`: inf, nan, negative, huge or not a number is argparse's one
error line and exit 2, before anything runs (a `--wait inf` would wait forever, a `--poll nan` crash in
time.sleep: an internal error); numbers in range parse as before."""

from __future__ import annotations

import argparse

import pytest

from ops.__main__ import COMMANDS, _parser, main

# The fewest arguments each command parses with (argparse only: nothing runs).
MINIMAL = {
    "preflight": ["--stage", "dev"],
    "addon-check": ["--stage", "dev"],
    "verify": ["--stage", "dev"],
    "verify-remote": ["--stage", "dev"],
    "leftovers": ["--stage", "dev"],
    "bench": ["--calibrate"],
    "rehearse": ["--stage", "dev"],
    "local-cluster": ["--stage", "dev"],
    "diff": ["--base", "HEAD"],
    "validate": [],
}
NEVER = [
    "inf",
    "-inf",
    "+inf",
    "Infinity",
    "nan",
    "-nan",
    "NaN",
    "1e400",
    "-1e400",
    "-1",
    "-0.5",
    "1e300",
    "9" * 5000,
    "ten",
    "",
    " ",
    "0x10",
    "1,5",
    "1_000",  # Python's int() and float() take these four; no command line means a number by them
    " 5 ",
    "\uff11\uff12",
    "\u0663",
]


def _refused(argv, capsys) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    errors = [line for line in captured.err.splitlines() if "error:" in line]
    assert len(errors) == 1 and captured.err.splitlines()[-1] == errors[0], captured.err
    assert len(errors[0]) < 300  # a 5000-digit value is not echoed whole
    return errors[0]


def _number_options():
    """(command, option, action) for every option of every command whose value is a number."""
    for command, sub in _parser()._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if action.option_strings and callable(action.type) and _takes_numbers(action.type):
                yield command, action.option_strings[-1], action


def _takes_numbers(kind) -> bool:
    for text in ("1", "8", "60"):
        try:
            value = kind(text)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def test_every_command_has_its_minimal_arguments():
    assert set(MINIMAL) == set(COMMANDS)


def test_no_number_option_keeps_a_bare_float_or_int_type():
    options = list(_number_options())
    assert {(c, o) for c, o, _ in options} >= {
        ("verify", "--wait"),
        ("verify", "--poll"),
        ("bench", "--concurrency"),
        ("rehearse", "--deploy-timeout"),
        ("rehearse", "--gpus"),
        ("rehearse", "--budget"),
    }
    assert all(action.type not in (float, int) for _, _, action in options)


@pytest.mark.parametrize("value", NEVER)
def test_every_number_option_refuses_what_is_no_sane_number(value, capsys):
    options = list(_number_options())
    assert options
    for command, option, _ in options:
        line = _refused([command, *MINIMAL[command], f"{option}={value}"], capsys)
        assert f"error: argument {option}: " in line, line


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "86401", "1e400", "-0.001", "1e9", "ten", ""])
def test_verify_wait_is_0_to_86400_seconds(value, capsys):
    line = _refused(["verify", "--stage", "dev", f"--wait={value}"], capsys)
    assert line.startswith("python -m ops verify: error: argument --wait: ")
    assert line.endswith("(allowed: a number from 0 to 86400 seconds)")


@pytest.mark.parametrize("value", ["0", "0.05", "-10", "3601", "inf", "nan", "1e400"])
def test_verify_poll_is_0_1_to_3600_seconds(value, capsys):
    line = _refused(["verify", "--stage", "dev", f"--poll={value}"], capsys)
    assert line.endswith("(allowed: a number from 0.1 to 3600 seconds)")


@pytest.mark.parametrize("value", ["0", "-1", "4097", "1.5", "inf", "nan", "1e3", "9" * 30])
def test_bench_concurrency_is_1_to_4096(value, capsys):
    line = _refused(["bench", "--calibrate", f"--concurrency={value}"], capsys)
    assert line.startswith("python -m ops bench: error: argument --concurrency: ")
    assert line.endswith("(allowed: an integer from 1 to 4096)")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["verify", "--stage", "dev"], {"wait": 0, "poll": 10}),
        (["verify", "--stage", "dev", "--wait", "1800", "--poll", "0.1"], {"wait": 1800.0, "poll": 0.1}),
        (["verify", "--stage", "dev", "--wait=86400", "--poll=3600"], {"wait": 86400.0, "poll": 3600.0}),
        (["verify", "--stage", "dev", "--wait", "0", "--poll", "+5"], {"wait": 0.0, "poll": 5.0}),
        (["bench", "--calibrate", "--concurrency", "4096"], {"concurrency": 4096}),
        (["bench", "--calibrate"], {"concurrency": 64}),
        (
            ["rehearse", "--stage", "dev", "--deploy-timeout", "1800", "--gpus", "2", "--budget", "1"],
            {"deploy_timeout": 1800.0, "gpus": 2, "budget": 1.0},
        ),
    ],
)
def test_numbers_in_range_parse_as_before(argv, expected):
    args = _parser().parse_args(argv)
    assert {key: getattr(args, key) for key in expected} == expected
    assert all(type(getattr(args, key)) is type(value) for key, value in expected.items())


def test_a_range_of_its_own_is_kept():
    """_parser() gives the shared range only to bare float/int options: --wait keeps its own."""
    parser = _parser()
    verify = parser._subparsers._group_actions[0].choices["verify"]
    wait = next(a for a in verify._actions if "--wait" in a.option_strings)
    with pytest.raises(argparse.ArgumentTypeError, match=r"0 to 86400 seconds"):
        wait.type("86401")


def test_every_option_that_takes_a_value_has_an_allowlist_type():
    """_parser() gives every plain string option clients.cli_options.text: none reads "" as absent."""
    for command, sub in _parser()._subparsers._group_actions[0].choices.items():
        for action in sub._actions:
            if action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                assert action.type is not None, (command, action.option_strings or action.dest)


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--config-dir", ""],
        ["diff", "--base", "HEAD", "--stage", ""],
        ["preflight", "--stage", ""],
        ["bench", "--stage", "dev", "--tokenizer", ""],
    ],
)
def test_an_empty_value_is_refused_not_read_as_the_default(argv, capsys):
    assert _refused(argv, capsys).endswith("'': empty (give a value)")
