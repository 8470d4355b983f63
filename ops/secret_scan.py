"""Find secret-shaped values in what a synth writes: AWS keys, Hugging Face tokens, private keys, and
any value the caller says is secret. `python -m ops scan-secrets DIR [--secret VALUE ...]`."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from config.rules import SECRET_SHAPES

# The value shapes are the stage-file check's (config/rules.py SECRET_SHAPES: one list for both); in
# generated files an AWS secret access key is recognised by its name nearby.
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


def _text_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.stat().st_size <= MAX_BYTES:
            head = path.read_bytes()[:4096]
            if b"\0" not in head:  # text, not a zip or a binary
                yield path


def scan(root: Path, secrets: Iterable[str] = ()) -> list[Finding]:
    patterns = dict(PATTERNS)
    for index, value in enumerate(v for v in secrets if v):
        patterns[f"configured secret #{index + 1}"] = re.compile(re.escape(value))
    findings = []
    for path in _text_files(root):
        text = path.read_text(errors="replace")
        for kind, pattern in patterns.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                findings.append(Finding(str(path.relative_to(root)), kind, line))
    return findings


def scanned_files(root: Path) -> int:
    return sum(1 for _ in _text_files(root))
