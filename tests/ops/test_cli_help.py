"""Every command's --help (`pd-inference COMMAND --help`, `python -m ops COMMAND --help`) ends with its own exit
codes (ops/exit_codes.py; tests/ops/test_exit_codes.py checks them against the code), and shows the options
every command shares: --config-dir and --json, or a line that says why this command does not take one."""

from __future__ import annotations

import pytest

from ops import exit_codes
from ops.__main__ import COMMANDS, NOT_TAKEN, SHARED_OPTIONS, _parser, main


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--help"])
    assert stopped.value.code == 0
    return capsys.readouterr().out


def _options(parser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _subparsers():
    parser = _parser()
    (sub,) = [action for action in parser._actions if action.dest == "command"]
    return sub.choices


def test_an_exit_code_table_is_one_row_a_code_wrapped_under_its_meaning():
    table = exit_codes.table({0: "done", "128+N": "stopped " * 20})
    assert table.splitlines() == [
        "Exit codes:",
        "  0      done",
        "  128+N  " + ("stopped " * 12).rstrip(),
        "         " + ("stopped " * 8).rstrip(),
    ]


def test_the_top_level_help_lists_every_command_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS) and exit_codes.OVERVIEW in out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_help_lists_its_exit_codes_and_the_shared_options(command, capsys):
    out = _help(capsys, command)
    assert out.startswith(f"usage: python -m ops {command} ")
    assert out.rstrip().endswith(exit_codes.table(exit_codes.codes(command)))  # its own, at the end of its help
    taken = _options(_subparsers()[command])
    for option in SHARED_OPTIONS:
        if option in taken:
            assert f"  {option}" in out  # listed among the options
        else:
            reason = NOT_TAKEN[command, option]
            assert f"{option}: not taken: " in out, out
            assert " ".join(out.split()).count(" ".join(reason.split())) == 1  # wrapped, but there


def test_not_taken_names_only_options_a_command_really_lacks():
    choices = _subparsers()
    for command, option in NOT_TAKEN:
        assert command in choices and option in SHARED_OPTIONS
        assert option not in _options(choices[command]), f"{command} takes {option} now: drop it from NOT_TAKEN"
    lacking = {(name, option) for name, parser in choices.items() for option in SHARED_OPTIONS}
    lacking -= {(name, option) for name, parser in choices.items() for option in _options(parser)}
    assert lacking == set(NOT_TAKEN)  # every option a command lacks has its reason


def test_validate_and_diff_take_json_and_validate_takes_config_dir():
    choices = _subparsers()
    assert {"--json", "--config-dir"} <= _options(choices["validate"])
    assert "--json" in _options(choices["diff"])
