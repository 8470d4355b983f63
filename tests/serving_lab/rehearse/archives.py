"""A rehearsal's results as `rehearsal_device_run.sh` archives them (NAME.tgz: ./dev/...), read for the tests of
committed GPU evidence."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from serving_lab.rehearse import oracle, oracle_run


def archived(archive: Path, name: str) -> Any:
    """One JSON file of the stage's results in the archive."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile(f"./dev/{name}")
        assert member is not None
        return json.loads(member.read())


def answers(archive: Path, mode: str) -> oracle.Levels:
    """The oracle's answers of one mode, by level."""
    return oracle_run.parse_answers(archived(archive, f"oracle-answers-{mode}.json"))[1]
