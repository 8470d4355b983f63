"""The repository reads the reference folder beside the checkout in one place only: tests/reference_data.py,
whose reader skips with one line naming the file when the folder is absent (a user's clone has nothing beside
it; CI has it). Upstream data that a registry serves comes from the registry at set-up (KubeRay's chart and
CRDs from the Go module proxy); the project commits no copy of either.

The check reads every file git knows here (tracked, and new files not ignored, so a new reader fails before
it is committed) and looks for a path into that folder: written out (dot-dot, slash, the folder's name; or
the absolute path of the development host), or built in Python from a parent directory and the folder's name.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from .helpers import ROOT

FOLDER = "shared"
_NAME = rf"""["']{FOLDER}\b"""
PATTERNS = [
    re.compile(rf"\.\./{FOLDER}\b"),  # written out, relative: in a script, a string, a comment
    re.compile(rf"/work/{FOLDER}\b"),  # written out, absolute (the development host's layout)
    # built: X.parent / "<name>", X.parents[1] / "<name>", X.parent / ".." / "<name>", X.parent.joinpath("<name>")
    re.compile(rf"""\bparents?(?:\[\d+\])?\s*/\s*(?:["']\.\.["']\s*/\s*)?{_NAME}"""),
    re.compile(rf"""\bparents?(?:\[\d+\])?\.joinpath\(\s*{_NAME}"""),
    # built: os.path.join(..., "..", "<name>"), Path("..") / "<name>"
    re.compile(rf"""["']\.\.["']\)?\s*[,/]\s*{_NAME}"""),
]


def _files() -> list[str]:
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    return sorted({name for name in listed if name and (ROOT / name).is_file()})


def _text(name: str) -> str | None:
    data = (ROOT / name).read_bytes()
    if b"\0" in data[:8192]:
        return None  # binary (a PNG, a tarball)
    return data.decode("utf-8", errors="replace")


def mentions(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line with a path into the folder."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), 1)
        if any(pattern.search(line) for pattern in PATTERNS)
    ]


def test_the_detector_finds_each_way_of_naming_the_folder():
    up, name = "..", FOLDER
    found = [
        f"crd={up}/{name}/crds/x.yaml",
        f"/work/{name}/helm-values",
        f'SHARED = ROOT.parent / "{name}"',
        f"base = Path(__file__).parents[2] / '{name}'",
        f'ROOT.parent / "{up}" / "{name}" / "x"',
        f'here.parent.joinpath("{name}")',
        f'os.path.join(ROOT, "{up}", "{name}")',
        f'Path("{up}") / "{name}"',
    ]
    missed = [line for line in found if not mentions(line)]
    assert missed == []
    harmless = [
        '{"cluster": {"name": "shared"}}',
        "shared = draw(st.sampled_from(paths))",
        "shared memory / TCP",
        'ROOT / "config" / "shared_names.py"',
        "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
    ]
    assert [line for line in harmless if mentions(line)] == []


READER = "tests/reference_data.py"


def test_only_the_reference_data_module_reads_the_folder_beside_it():
    files = _files()
    assert len(files) > 200 and READER in files and "tests/test_self_contained.py" in files
    counts: dict[str, list[tuple[int, str]]] = {}
    for name in files:
        text = None if name.endswith(".md") else _text(name)  # the docs may say where CI's copy is
        if text is not None and (hits := mentions(text)):
            counts[name] = hits
    assert set(counts) == {READER}, (
        "files with a path into the folder beside the checkout (read it through tests/reference_data.py):\n"
        + "\n".join(f"{name}:{number}: {line}" for name, hits in counts.items() for number, line in hits)
    )


def test_a_missing_reference_file_is_a_skip_that_names_it(tmp_path):
    from . import reference_data

    missing = tmp_path / "helm-values" / "x.values.yaml"
    with pytest.raises(pytest.skip.Exception, match=rf"{missing} is absent"):
        reference_data.shared_file(missing)


def test_no_copy_of_upstream_data_is_committed():
    # KubeRay's CRDs carry this generator annotation; a chart's values.yaml its image block. Neither is ours.
    files = _files()
    marker = "controller-gen.kubebuilder.io/" + "version:"  # split, so this file does not match itself
    crds = [n for n in files if (t := _text(n)) and marker in t]
    values = [n for n in files if n.endswith("values.yaml")]
    assert (crds, values) == ([], [])
