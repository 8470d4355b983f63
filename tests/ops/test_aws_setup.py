"""A broken local AWS set-up (a profile that does not exist, a config file that does not parse, an endpoint
URL that is not a URL) is one line with the fix and exit 2 for every command that talks to AWS, before
any AWS call; only a real bug is an internal error (exit 3). No AWS access: botocore fails locally."""

from __future__ import annotations

import pytest

from ops import verify
from ops.__main__ import COMMANDS as ALL_COMMANDS
from ops.__main__ import main
from ops.stage_commands import StageCommand
from tests.helpers import one_error_line

# every stage command: each makes its AWS session the one way (ops/stage_commands.py)
COMMANDS = [name for name, command in ALL_COMMANDS.items() if isinstance(command, StageCommand)]
GARBAGE = "[default\nregion = us-west-2\n[[[ not an ini file\n"


_one_line = one_error_line


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("variable", ["AWS_PROFILE", "AWS_DEFAULT_PROFILE"])
def test_missing_profile_is_one_line_and_exit_2(command, variable, local_aws, monkeypatch, capsys):
    monkeypatch.setenv(variable, "nope")
    assert main([command, "--stage", "dev"]) == 2
    assert _one_line(capsys) == (
        f"{command} --stage dev: AWS profile 'nope' (from AWS_PROFILE or AWS_DEFAULT_PROFILE) "
        f"is in no AWS config file: use one that `aws configure list-profiles` lists, or "
        f"unset the variable"
    )


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("variable", ["AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"])
def test_unparsable_config_file_is_one_line_and_exit_2(command, variable, local_aws, monkeypatch, capsys):
    garbage = local_aws / "garbage"
    garbage.write_text(GARBAGE)
    monkeypatch.setenv(variable, str(garbage))
    assert main([command, "--stage", "dev"]) == 2
    assert _one_line(capsys) == (
        f"{command} --stage dev: cannot parse the AWS config file {garbage}: fix its syntax "
        f"([profile NAME] sections of key = value lines), or point AWS_CONFIG_FILE / "
        f"AWS_SHARED_CREDENTIALS_FILE at a valid file"
    )


@pytest.mark.parametrize(
    "command, variable",
    [(command, "AWS_ENDPOINT_URL") for command in COMMANDS]
    + [("verify", "AWS_ENDPOINT_URL_EKS"), ("preflight", "AWS_ENDPOINT_URL_STS")],
)
@pytest.mark.parametrize("url", ["not a url", "ftp//nothing"])
def test_endpoint_url_that_is_not_a_url_is_one_line_and_exit_2(command, variable, url, local_aws, monkeypatch, capsys):
    monkeypatch.setenv(variable, url)
    assert main([command, "--stage", "dev"]) == 2
    assert _one_line(capsys) == (
        f"{command} --stage dev: the AWS endpoint URL {url!r} is not a URL (AWS_ENDPOINT_URL, "
        f"AWS_ENDPOINT_URL_<SERVICE> or endpoint_url in the AWS config): unset it, or give a "
        f"full URL such as https://host:port"
    )


@pytest.mark.parametrize("error", [RuntimeError("boom"), ValueError("not about an endpoint"), KeyError("x")])
def test_a_real_bug_stays_an_internal_error(error, local_aws, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(verify, "cluster_access", broken)
    assert main(["verify", "--stage", "dev"]) == 3
    line = _one_line(capsys)
    assert line.startswith(f"verify: internal error: {type(error).__name__}: ")
    assert line.endswith("(a bug: rerun with --debug and report it)")
