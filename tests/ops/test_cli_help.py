"""Every command's --help (`pd-inference COMMAND --help`, `python -m ops COMMAND --help`) shows the same exit
codes, those of ops/__main__.py's docstring, and the options every command shares: --config-dir and --json,
or a line that says why this command does not take one."""

from __future__ import annotations

import pytest

from ops.__main__ import COMMANDS, EXIT_CODES, NOT_TAKEN, SHARED_OPTIONS, _parser, main


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


def test_the_exit_codes_are_those_of_the_docstring():
    import ops.__main__

    assert EXIT_CODES in ops.__main__.__doc__
    codes = [line.split()[0] for line in EXIT_CODES.splitlines()[1:] if not line.startswith("   ")]
    assert codes == ["0", "1", "2", "3", "128+N"]


def test_the_top_level_help_lists_every_command_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in COMMANDS) and EXIT_CODES in out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_help_lists_the_exit_codes_and_the_shared_options(command, capsys):
    out = _help(capsys, command)
    assert out.startswith(f"usage: python -m ops {command} ")
    assert out.rstrip().endswith(EXIT_CODES)  # the same list, at the end of every command's help
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
