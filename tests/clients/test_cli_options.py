"""The option types every command shares (clients/cli_options.py): each refuses by meaning, with one line that
quotes the value safely; the paths are real files, FIFOs and devices of this machine."""

from __future__ import annotations

import argparse
import os

import pytest

from clients import cli_options as options


def _refusal(kind, value: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        kind(value)
    return str(info.value)


@pytest.mark.parametrize("value", ["1_000", " 5 ", "5\n", "\uff11\uff12", "\u0663", "0x10", "1e5", "inf", "nan", ""])
def test_an_integer_is_ascii_digits_only(value):
    assert "is not an integer" in _refusal(options.number(int, 0, 10**6), value)


@pytest.mark.parametrize("value", ["1_000.5", " 1.5", "\uff11.5", "Infinity", "1e400", "-nan", ".", "1e"])
def test_a_decimal_is_ascii_digits_point_and_exponent_only(value):
    assert "is not a" in _refusal(options.number(float, 0, 10**6), value)


@pytest.mark.parametrize("value, expected", [("+5", 5.0), ("5.", 5.0), (".5", 0.5), ("1e-3", 0.001), ("-0", 0.0)])
def test_plain_decimals_parse(value, expected):
    assert options.number(float, -1, 10)(value) == expected


@pytest.mark.parametrize(
    "value, problem",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("dev\n", "has a control character"),
        ("dev\x1b[31m", "has a control character"),
        ("a\u202eb", "has a control character"),  # a bidi override reorders what the terminal shows
        (" dev", "has spaces at its ends"),
        ("x" * 4097, "4097 characters (allowed: at most 4096)"),
    ],
)
def test_text_is_printable_and_not_empty(value, problem):
    message = _refusal(options.text, value)
    assert problem in message and message.isprintable() and len(message) < 120


@pytest.mark.parametrize("value", ["../run", "run/x", ".hidden", "-x", "a b", "é", "x" * 65, ""])
def test_a_file_label_cannot_leave_its_folder(value):
    assert "allowed: 1-64 of A-Z a-z 0-9 . _ -" in _refusal(options.file_label, value)


def test_a_file_label_takes_a_run_name():
    assert options.file_label("pd-haproxy_2.1") == "pd-haproxy_2.1"


@pytest.fixture
def paths(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    return tmp_path


@pytest.mark.parametrize(
    "name, problem",
    [
        ("missing", "no such folder"),
        ("file", "a regular file, not a folder"),
        ("fifo", "a FIFO (named pipe), not a folder"),
        ("loop", "unreadable (Too many levels of symbolic links)"),
        ("y" * 300, "unreadable (File name too long)"),  # stat() raises, where is_dir() would too
    ],
)
def test_a_folder_must_be_one(paths, name, problem):
    assert _refusal(options.folder, str(paths / name)).endswith(problem)


def test_a_device_is_no_folder_or_regular_file():
    assert _refusal(options.folder, "/dev/null").endswith("a character device, not a folder")
    assert _refusal(options.regular_file, "/dev/zero").endswith("a character device, not a regular file")


@pytest.mark.parametrize("name", ["fifo", "dir", "missing"])
def test_a_regular_file_is_never_a_fifo_a_folder_or_absent(paths, name):
    assert "regular file" in _refusal(options.regular_file, str(paths / name))


@pytest.mark.parametrize(
    "name, problem", [("fifo", "a FIFO (named pipe), not a regular file"), ("dir", "a folder, not")]
)
def test_an_output_file_is_never_a_fifo_nobody_reads(paths, name, problem):
    assert problem in _refusal(options.output_file, str(paths / name))


def test_an_output_file_may_be_new_in_a_folder_that_exists_or_can_be_made(paths):
    assert options.output_file(str(paths / "dir" / "new.md")) == str(paths / "dir" / "new.md")
    assert options.output_file(str(paths / "nodir" / "new.md")) == str(paths / "nodir" / "new.md")
    assert "cannot be created in" in _refusal(options.output_file, str(paths / "file" / "new.md"))


@pytest.mark.parametrize("check", [options.output_folder, options.output_file, options.folder])
def test_a_link_to_nothing_is_named_so_not_taken_for_absent(paths, check):
    # taken for absent, `bench --compare --out` did all its work, then failed making the folder (EEXIST, exit 1)
    assert "a dangling symbolic link, not a" in _refusal(check, str(paths / "dangling"))


def test_an_output_folder_may_be_made_below_an_existing_folder(paths):
    assert options.output_folder(str(paths / "a" / "b")) == str(paths / "a" / "b")
    assert "cannot be created in" in _refusal(options.output_folder, str(paths / "file" / "b"))
    assert _refusal(options.output_folder, str(paths / "fifo")).endswith("a FIFO (named pipe), not a folder")


@pytest.mark.parametrize(
    "value",
    ["ftp://x", "localhost:8000", "http://", "http://[::1", "http://a:99999", "http://a:b", "javascript:alert(1)"],
)
def test_a_url_is_http_or_https_with_a_host_and_a_port_in_range(value):
    assert "allowed: http://HOST[:PORT][/PATH] or https://..." in _refusal(options.http_url, value)


@pytest.mark.parametrize("value", ["http://127.0.0.1:8000", "https://serve.example/v1", "http://[::1]:80"])
def test_plain_urls_pass(value):
    assert options.http_url(value) == value


def test_an_argument_error_is_one_line_and_exit_2(capsys):
    parser = options.OneLineParser(prog="tool")
    sub = parser.add_subparsers(dest="command", required=True).add_parser("run")
    sub.add_argument("--count", type=options.number(int, 1, 9), required=True)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["run", "--count", "x"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "tool run: error: argument --count: x is not an integer (allowed: an integer from 1 to 9)"
    ]


@pytest.mark.parametrize("module", ["matrix", "oracle_run", "checkpoint", "nixl_probe", "graph_arms"])
def test_the_labs_commands_refuse_bad_arguments_in_one_line(module):
    import subprocess
    import sys

    from ..helpers import ROOT

    run = subprocess.run(
        [sys.executable, "-m", f"serving_lab.rehearse.{module}", "--bogus"],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    # argparse's usage block came first (OneLineParser): one `prog: error: ...` line now, whichever error it is
    assert run.returncode == 2 and run.stderr.splitlines() == [run.stderr.strip()], run.stderr
    assert ": error: " in run.stderr
