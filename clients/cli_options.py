"""Option types the commands share, each an allowlist of what the option means (the stage options:
config/stage_options.py). A value outside it is argparse's one-line error naming the option, and exit 2, before
the command touches a host, a cluster or a file: a number in ASCII digits within its range, text of printable
characters, a folder that is one, a file that is a regular file, an http(s) URL, a name safe in a file name."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar
from urllib.parse import urlsplit

from .files import kind_of
from .text import shown

# Python's int() and float() also take "1_000", " 5 ", "１２" (full-width) and "٣" (Arabic-Indic): none is what a
# command line means by a number, so the syntax is matched first.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
Number = TypeVar("Number", int, float)
# Every number option of every command that does not bring its own range gets this top (ops' _parser): seconds
# and counts far below 1e9 s (thread timeouts overflow past threading.TIMEOUT_MAX, about 9.2e9 s).
NUMBER_MAX = 1e9
TEXT_MAX = 4096  # PATH_MAX on Linux: no option of these commands means more
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a label that becomes part of a file name


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors on one line, `prog: error: message`, and exit 2: the usage block it printed first ran
    to 21 lines for `ops rehearse` (--help still prints it). Subcommands inherit the class (argparse's
    add_subparsers makes each with type(self))."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def number(kind: type[Number], low: float, high: float, unit: str = "") -> Callable[[str], Number]:
    """An argparse type: a finite `kind` (int or float) from `low` to `high`, written in ASCII digits. Anything else
    (inf, nan, -1, 1e400, "ten", "1_000", a 5000-digit integer) is argparse's one-line error and exit 2: a
    timeout of inf or nan would otherwise reach time.sleep or a deadline as a crash or a wait that never ends."""
    what = "an integer" if kind is int else "a number"
    allowed = f"allowed: {what} from {low:g} to {high:g}" + (f" {unit}" if unit else "")

    def parse(text: str) -> Number:
        try:
            value = decimal(text, kind)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{exc} ({allowed})") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{_shown(text)} ({allowed})")
        return value

    parse.__name__ = kind.__name__
    return parse


def decimal(text: str, kind: type[Number]) -> Number:
    """`text` as a finite `kind` (int or float) in ASCII digits, or an ArgumentTypeError saying it is not one."""
    what = "an integer" if kind is int else "a number"
    syntax = _INTEGER if kind is int else _DECIMAL
    if len(text) > 40 or not syntax.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not {what}")
    value = kind(text)
    if not math.isfinite(value):  # 1e400 is inf
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a finite number")
    return value


def text(value: str) -> str:
    """The type of every option that takes a plain string (ops' _parser gives it them): printable characters, no
    spaces at its ends, at most TEXT_MAX. An empty value is refused rather than read as the option's absence."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"{_shown(value)}: empty (give a value)")
    if len(value) > TEXT_MAX:
        raise argparse.ArgumentTypeError(f"{_shown(value)}: {len(value)} characters (allowed: at most {TEXT_MAX})")
    if not value.isprintable():
        raise argparse.ArgumentTypeError(f"{_shown(value)}: has a control character (allowed: printable text)")
    if value.strip() != value:
        raise argparse.ArgumentTypeError(f"{_shown(value)}: has spaces at its ends")
    return value


def file_label(value: str) -> str:
    """A label that names files (a run's `<time>-<label>.json`): letters, digits, '.', '_' and '-', at most 64,
    starting with a letter or digit, so it can never climb out of its folder."""
    if not LABEL.fullmatch(value):
        raise argparse.ArgumentTypeError(
            f"{_shown(value)} (allowed: 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit)"
        )
    return value


def folder(value: str) -> str:
    """An existing folder."""
    return _existing(value, "folder")


def regular_file(value: str) -> str:
    """An existing regular file (never a FIFO, which blocks its reader, or a device, which never ends)."""
    return _existing(value, "regular file")


def output_folder(value: str) -> str:
    """A folder to write into: one that exists, or one whose nearest existing parent is a folder (it is created)."""
    return _output(value, "folder", _nearest_existing(Path(value).absolute().parent))


def output_file(value: str) -> str:
    """A file to write: a regular file, or an absent one whose folder exists or can be made; never a FIFO (opening
    one blocks until a reader comes) or a device."""
    return _output(value, "regular file", _nearest_existing(Path(value).absolute().parent))


def _existing(value: str, wanted: str) -> str:
    kind = path_kind(text(value))
    if kind != f"a {wanted}":
        raise _refused(value, kind, wanted)
    return value


def _output(value: str, wanted: str, parent: Path) -> str:
    """`value` is `wanted`, or absent with `parent` a folder this user may write in."""
    kind = path_kind(text(value))
    if kind == "absent":
        if path_kind(str(parent)) != "a folder" or not os.access(parent, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{_shown(value)}: cannot be created in {shown(parent)}")
    elif kind != f"a {wanted}":
        raise _refused(value, kind, wanted)
    return value


def http_url(value: str) -> str:
    """An http:// or https:// URL with a host, and a port from 1 to 65535 when it names one."""
    try:
        parts = urlsplit(text(value))
        port = parts.port
    except ValueError:  # an unclosed [ of an IPv6 host, a port that is not a number or past 65535
        parts, port = urlsplit(""), 0
    if parts.scheme not in ("http", "https") or not parts.hostname or port == 0 or " " in value:
        raise argparse.ArgumentTypeError(f"{_shown(value)} (allowed: http://HOST[:PORT][/PATH] or https://...)")
    return value


def _refused(value: str, kind: str, wanted: str) -> argparse.ArgumentTypeError:
    found = (
        f"no such {wanted}"
        if kind == "absent"
        else kind
        if kind.startswith("unreadable")
        else f"{kind}, not a {wanted}"
    )
    return argparse.ArgumentTypeError(f"{_shown(value)}: {found}")


def path_kind(value: str) -> str:
    """What `value` names, in words: 'absent', 'a folder', 'a regular file', another kind, or why it cannot be read."""
    try:
        mode = os.stat(value).st_mode
    except (FileNotFoundError, NotADirectoryError):
        # a link to nothing: writing through it would create its target, and making a folder there fails (EEXIST)
        return "a dangling symbolic link" if os.path.islink(value) else "absent"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return "a regular file" if stat.S_ISREG(mode) else kind_of(mode)


def _nearest_existing(path: Path) -> Path:
    while path_kind(str(path)) == "absent" and path != path.parent:
        path = path.parent
    return path


def _shown(text: str) -> str:
    text = text if len(text) <= 40 else text[:40] + "..."
    return text if text.isprintable() and text.strip() == text and text else repr(text)
