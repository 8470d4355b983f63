"""clients/text.py shown: the one sanitizer between text from elsewhere (a cluster, a results file) and a terminal,
a report or a plot."""

from __future__ import annotations

import pytest

from clients.text import shown


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\x1b[2J", "\\x1b[2J"),  # C0: an escape sequence
        ("a\rb", "a\\x0db"),  # a carriage return
        ("a\nb\tc", "a\\x0ab\\x09c"),
        ("\x7f\x85\x9b", "\\x7f\\x85\\x9b"),  # DEL and C1 (NEL, CSI)
        ("\u202e\u2066\u200f\u061c", "\\u202e\\u2066\\u200f\\u061c"),  # bidi controls
        ("\u2028", "\\u2028"),  # a line separator
        ("Qwen/Qwen3.5-9B é 模型", "Qwen/Qwen3.5-9B é 模型"),  # printable text as it is
    ],
)
def test_every_unprintable_character_is_shown_as_its_escape(text, expected):
    assert shown(text) == expected


def test_text_past_the_bound_is_cut_with_a_count_of_what_was_left_out():
    assert shown("x" * 1000, 10) == "x" * 10 + "... (990 more characters)"
    assert shown("\x1b" * 10, 8) == "\\x1b\\x1b... (8 more characters)"  # the bound counts the escapes
    assert shown("x" * 10, 10) == "x" * 10
