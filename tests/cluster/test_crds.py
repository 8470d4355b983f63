"""The committed KubeRay CRDs are the files SOURCE.md names, byte for byte (digests)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from localcluster.rehearsal import CRDS


def test_each_committed_crd_has_the_digest_its_source_note_records():
    folder = CRDS / "kuberay-v1.7.0"
    recorded = dict(re.findall(r"\| `([^`]+\.yaml)` \| `([0-9a-f]{64})` \|", (folder / "SOURCE.md").read_text()))
    found = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).glob("*.yaml"))}
    assert found and found == recorded
