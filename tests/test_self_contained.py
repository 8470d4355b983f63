"""The repository is self-contained: no file of it reads the reference folder that sits beside the checkout
where the project was developed (a user's clone has nothing beside it). Every reference file the tests and
scripts validate against is committed data: localcluster/crds/kuberay-v1.7.0/, config/chart_values/ and
rehearsal/, each with its source recorded beside it.

The check reads every file git knows here (tracked, and new files not ignored, so a new reader fails before
it is committed) and looks for a path into that folder: written out (dot-dot, slash, the folder's name; or
the absolute path of the development host), or built in Python from a parent directory and the folder's name.
"""

from __future__ import annotations

import re
import subprocess

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


def test_no_file_of_the_repository_reads_the_folder_beside_it():
    files = _files()
    assert len(files) > 200 and "tests/helpers.py" in files and "tests/test_self_contained.py" in files
    counts: dict[str, list[tuple[int, str]]] = {}
    for name in files:
        text = _text(name)
        if text is not None and (hits := mentions(text)):
            counts[name] = hits
    assert counts == {}, (
        "files with a path into the folder beside the checkout (commit the data instead):\n"
        + "\n".join(f"{name}:{number}: {line}" for name, hits in counts.items() for number, line in hits)
    )
