"""Every Python file of the project compiles without a warning: an invalid escape sequence is a
DeprecationWarning on the CI's Python 3.11 (silent) and a SyntaxWarning on 3.12+ (printed on every run:
the GPU rehearsal host, Python 3.12, printed one for config/schema.py)."""

from __future__ import annotations

import subprocess
import warnings

from .helpers import ROOT


def test_no_python_file_compiles_with_a_warning():
    files = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(files) > 100
    found = []
    for name in files:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compile((ROOT / name).read_text(), name, "exec")
        found += [
            f"{name}:{w.lineno}: {w.message}"
            for w in caught
            if issubclass(w.category, (SyntaxWarning, DeprecationWarning))
        ]
    assert found == []
