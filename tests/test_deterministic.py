"""Two synths of the same commit write identical templates, asset manifests and rendered YAML
(only *.metadata.json carry temporary paths), so a diff shows only what a change changed."""

from __future__ import annotations

import json
import subprocess
import sys

from .helpers import ROOT, clean_env

VARYING = (".metadata.json",)


def _synth(outdir):
    env = clean_env(CDK_OUTDIR=str(outdir), CDK_CONTEXT_JSON=json.dumps({"nag": True}))
    subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    return {
        p.relative_to(outdir).as_posix(): p
        for p in outdir.rglob("*")
        if p.is_file()
        and not p.name.endswith(VARYING)
        and not p.name.startswith("asset.")
        and ".zip" not in p.name
        and "/asset." not in p.as_posix()
    }


def test_two_synths_are_identical(tmp_path):
    first, second = _synth(tmp_path / "a"), _synth(tmp_path / "b")
    assert sorted(first) == sorted(second)
    templates = [name for name in first if name.endswith(".template.json")]
    yaml_files = [name for name in first if name.startswith("k8s/")]
    assert len(templates) == 6 and len(yaml_files) == 8
    different = [name for name in first if first[name].read_bytes() != second[name].read_bytes()]
    assert different == []
