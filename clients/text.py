"""Text from elsewhere (a cluster's answers, a results file) made safe to show: one function, `shown`.

A terminal acts on control characters: an escape sequence in a model id can clear the screen or rewrite earlier
lines, a carriage return overwrites the start of its own line, and Unicode's bidirectional controls make a line
read in another order than it is written (Trojan Source). Every such character is shown as its escape, and the
text is cut to a bound with a count of what was cut, so 100,000 ids are not one 5.5 MB line."""

from __future__ import annotations

# C0, DEL and C1 controls are unprintable (str.isprintable); so are the format characters, bidi controls among
# them (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C), and the line and paragraph separators.
DETAIL_CHARS = 400  # a report line's detail or fix: a few model ids or node names, with their context


def shown(text: object, limit: int = DETAIL_CHARS) -> str:
    """`text` as one line: every unprintable character as its escape (\\x1b, \\r, \\u202e), at most `limit`
    characters of the result and then how many characters of `text` were left out."""
    value = str(text)
    out: list[str] = []
    length = 0
    for index, char in enumerate(value):
        piece = char if char.isprintable() or char == " " else _escape(char)
        if length + len(piece) > limit:
            return "".join(out) + f"... ({len(value) - index} more characters)"
        out.append(piece)
        length += len(piece)
    return "".join(out)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
