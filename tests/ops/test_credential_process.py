"""A profile's credential_process that never answers: botocore waits for it with no timeout, so every AWS
command would hang. The credentials are resolved once, within ops.aws_clients.CREDENTIAL_DEADLINE_S:
past it the command prints one line naming the profile and exits 2, and the process it started is ended
(SIGTERM, then SIGKILL), not left behind. One that fails (or is missing, or prints no JSON) is one line
and exit 2 too: the local set-up, before any AWS call. Real processes, real AWS config files."""

from __future__ import annotations

import json
import os
import sys
import time

import boto3
import pytest

from ops import aws_clients
from ops.__main__ import COMMANDS as ALL_COMMANDS
from ops.__main__ import main
from ops.stage_commands import StageCommand
from tests.helpers import one_error_line

# every stage command: each makes its AWS session the one way (ops/stage_commands.py)
COMMANDS = [name for name, command in ALL_COMMANDS.items() if isinstance(command, StageCommand)]
DEADLINE_S = 1.0


@pytest.fixture
def aws_config(monkeypatch, local_aws):
    """write(profiles: {name: {key: value}}, use=name): an AWS config file, AWS_PROFILE set to `use`."""
    tmp_path = local_aws
    monkeypatch.setattr(aws_clients, "CREDENTIAL_DEADLINE_S", DEADLINE_S)

    def write(profiles: dict, use: str):
        path = tmp_path / "aws-config"
        path.write_text(
            "".join(
                f"[profile {name}]\nregion = us-west-2\n" + "".join(f"{key} = {value}\n" for key, value in keys.items())
                for name, keys in profiles.items()
            )
        )
        monkeypatch.setenv("AWS_CONFIG_FILE", str(path))
        monkeypatch.setenv("AWS_PROFILE", use)

    return write


_one_line = one_error_line


def _hanging(tmp_path, ignore_term: bool = False) -> str:
    """A credential_process that writes its pid to tmp_path/pid and then waits 30 s (ignoring SIGTERM)."""
    script = tmp_path / "hang.py"
    script.write_text(
        "import os, signal, sys, time\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
        + f"open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(30)\n"
    )
    return f"{sys.executable} {script}"


def _gone(pid: int) -> bool:
    """The process has ended and been reaped (a zombie would still hold /proc/<pid>)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("command", COMMANDS)
def test_a_credential_process_that_sleeps_is_one_line_and_exit_2(command, aws_config, capsys):
    aws_config({"hang": {"credential_process": "sleep 30"}}, use="hang")
    started = time.monotonic()
    assert main([command, "--stage", "dev"]) == 2
    assert time.monotonic() - started < 10
    line = _one_line(capsys)
    assert line.startswith(
        f"{command} --stage dev: the AWS credential_process of profile 'hang' did not answer within 1 s (process "
    )
    assert line.endswith(
        "ended): run it yourself to see what it waits for (a prompt, a login, a lock), fix it or use another profile"
    )
    assert not any(_cmdline(pid) == ["sleep", "30"] for pid in aws_clients._children())


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().decode().split("\0")[:-1]
    except OSError:
        return []


@pytest.mark.parametrize("ignore_term", [False, True], ids=["ends-on-sigterm", "ignores-sigterm"])
def test_the_process_does_not_outlive_the_deadline(ignore_term, aws_config, tmp_path, capsys):
    aws_config({"hang": {"credential_process": _hanging(tmp_path, ignore_term)}}, use="hang")
    started = time.monotonic()
    assert main(["preflight", "--stage", "dev"]) == 2
    assert time.monotonic() - started < 10
    pid = int((tmp_path / "pid").read_text())
    assert f"(process {pid} ended)" in _one_line(capsys)
    assert _gone(pid)


def test_a_source_profile_whose_process_hangs_names_that_profile(aws_config, tmp_path, capsys):
    aws_config(
        {
            "base": {"credential_process": _hanging(tmp_path)},
            "deploy": {"role_arn": "arn:aws:iam::123456789012:role/deploy", "source_profile": "base"},
        },
        use="deploy",
    )
    assert main(["verify", "--stage", "dev"]) == 2
    line = _one_line(capsys)
    assert (
        "the AWS credential_process of profile 'base' (the source_profile of 'deploy') did not answer within 1 s"
    ) in line
    assert _gone(int((tmp_path / "pid").read_text()))


@pytest.mark.parametrize(
    "process, detail",
    [
        (
            "sh -c 'echo first >&2; echo second >&2; exit 3'",
            "failed: Error when retrieving credentials from custom-process: first second -> run it yourself",
        ),
        ("/nonexistent/credential-helper", "failed: FileNotFoundError: [Errno 2] No such file or directory"),
        ("echo not-json", "failed: JSONDecodeError: Expecting value"),
        ("echo []", "failed: AttributeError: 'list' object has no attribute 'get'"),
        (
            "echo '{\"Version\": 2}'",
            "failed: Error when retrieving credentials from custom-process: Unsupported version",
        ),
        ("echo '{\"Version\": 1}'", "Missing required key in response"),
        (
            f"{sys.executable} -c \"import sys; sys.stderr.buffer.write(b'\\xff'); sys.exit(1)\"",
            "failed: UnicodeDecodeError",
        ),
    ],
    ids=["exits-3", "missing", "not-json", "json-list", "version-2", "no-keys", "stderr-not-utf-8"],
)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_credential_process_that_fails_is_one_line_and_exit_2(command, process, detail, aws_config, capsys):
    aws_config({"broken": {"credential_process": process}}, use="broken")
    assert main([command, "--stage", "dev"]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"{command} --stage dev: the AWS credential_process of profile 'broken' failed: ")
    assert detail in line, line


def test_a_process_that_answers_in_time_gives_the_session_its_credentials(aws_config, tmp_path):
    answer = {"Version": 1, "AccessKeyId": "AKIDEXAMPLE", "SecretAccessKey": "secret"}
    script = tmp_path / "ok.py"
    script.write_text(f"print({json.dumps(json.dumps(answer))})\n")
    aws_config({"ok": {"credential_process": f"{sys.executable} {script}"}}, use="ok")
    session = boto3.session.Session(region_name="us-west-2")
    credentials = aws_clients.resolve_credentials(session, deadline=30)
    assert credentials.access_key == "AKIDEXAMPLE"
    assert session.get_credentials() is credentials  # botocore keeps it: the process ran once


def test_the_default_deadline_is_a_minute():
    assert aws_clients.CREDENTIAL_DEADLINE_S == 60.0  # no fixture here: the module's own value
