"""Find secret-shaped values in what a synth writes: AWS keys, vendors' tokens (by the shape of a prefix and
a token part), private and SSH2 key files, URLs with a password, tokens given to a secret-like name (`"Password":
"..."`, an environment variable's name/value pair), and any value the caller says is secret. app.py runs
`scan` on cdk.out after every synth."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .secret_shapes import SECRET_SHAPES

# The value shapes are the stage-file check's (config/secret_shapes.py SECRET_SHAPES: one list for both, each with
# search and finditer, some confirming each match with a test); in generated files an AWS secret access key is
# recognised by its name nearby.
PATTERNS = {
    **{kind.split(" ", 1)[1]: pattern for kind, pattern in SECRET_SHAPES},
    "AWS secret access key": re.compile(r"(?i)aws.{0,24}secret.{0,24}[\"':= ]+[0-9A-Za-z/+]{40}\b"),
}
MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    path: str
    kind: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind}"


def _text_files(root: Path) -> Iterable[tuple[Path, bool]]:
    """(path, within the cap) of every text file (not a zip or a binary: no NUL in its first 4 KiB)."""
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                head = handle.read(4096)
            if b"\0" not in head:
                yield path, path.stat().st_size <= MAX_BYTES


def scan(root: Path, secrets: Iterable[str] = ()) -> list[Finding]:
    """Every match of every pattern in every text file. Linear in the files: each pattern is one pass, and a
    match's line comes from the sorted newline offsets (bisect), not from counting newlines from the start of
    the file for every match. A text file over MAX_BYTES is not scanned: it is a finding of its own."""
    patterns = dict(PATTERNS)
    for index, value in enumerate(v for v in secrets if v):
        patterns[f"configured secret #{index + 1}"] = re.compile(re.escape(value))
    findings = []
    for path, within in _text_files(root):
        name = str(path.relative_to(root))
        if not within:
            findings.append(
                Finding(name, f"a text file over {MAX_BYTES} bytes, not scanned (allowed: up to {MAX_BYTES} bytes)", 0)
            )
            continue
        text = path.read_text(errors="replace")
        newlines: list[int] = []
        for kind, pattern in patterns.items():
            for match in pattern.finditer(text):
                if not newlines and "\n" in text:
                    newlines = [m.start() for m in re.finditer("\n", text)]
                findings.append(Finding(name, kind, bisect.bisect_left(newlines, match.start()) + 1))
    return findings


def scanned_files(root: Path) -> int:
    return sum(1 for _, within in _text_files(root) if within)
