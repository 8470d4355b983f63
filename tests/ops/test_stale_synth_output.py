"""One cdk.out, two synths of different stages (what `scripts/synth.sh dev` then `scripts/synth.sh prod` do):
the second replaces its own stage's output and keeps the first's, its cloud assembly and its rendered
Kubernetes YAML alike, never one without the other. The top-level manifest names the last synth's stages."""

from __future__ import annotations

import json

import app
from stacks import assembly


def _stages(outdir) -> dict[str, list[str]]:
    manifest = json.loads((outdir / "manifest.json").read_text())
    return {
        "manifest": sorted(
            artifact["properties"]["directoryName"].removeprefix("assembly-")
            for artifact in manifest["artifacts"].values()
            if artifact["type"] == "cdk:cloud-assembly"
        ),
        "assemblies": sorted(path.name.removeprefix("assembly-") for path in outdir.glob("assembly-*")),
        "k8s": sorted(path.name for path in (outdir / "k8s").iterdir()),
    }


def test_a_synth_of_another_stage_keeps_the_first_stages_output(tmp_path, capsys):
    outdir = tmp_path / "cdk.out"
    assert app.main(context={"stage": "dev"}, outdir=str(outdir)) == 0
    assert _stages(outdir) == {"manifest": ["dev"], "assemblies": ["dev"], "k8s": ["dev"]}
    (outdir / "k8s" / "prod").mkdir()
    (outdir / "k8s" / "prod" / "left-by-an-older-synth.yaml").write_text("{}\n")
    assert app.main(context={"stage": "prod"}, outdir=str(outdir)) == 0
    assert _stages(outdir) == {"manifest": ["prod"], "assemblies": ["dev", "prod"], "k8s": ["dev", "prod"]}
    assert not (outdir / "k8s" / "prod" / "left-by-an-older-synth.yaml").exists()  # its own stage: replaced


def test_only_assemblies_the_manifest_does_not_name_are_removed(tmp_path):
    (tmp_path / "manifest.json").write_text(
        json.dumps(
            {
                "version": "x",
                "artifacts": {
                    "assembly-prod": {"type": "cdk:cloud-assembly", "properties": {"directoryName": "assembly-prod"}},
                    "prod-network": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "t.json"}},
                },
            }
        )
    )
    for name in ("assembly-prod", "assembly-dev", "assembly-old-pipeline", "k8s", "asset.1234"):
        (tmp_path / name).mkdir()
    (tmp_path / "assembly-notes.txt").write_text("a file, not an assembly")
    assert assembly.remove_stale_assemblies(tmp_path) == ["assembly-dev", "assembly-old-pipeline"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["asset.1234", "assembly-notes.txt", "assembly-prod", "k8s", "manifest.json"]
    )


def test_no_manifest_removes_nothing(tmp_path):
    (tmp_path / "assembly-dev").mkdir()
    assert assembly.remove_stale_assemblies(tmp_path) == [] and (tmp_path / "assembly-dev").is_dir()
