"""One cdk.out, two synths of different stages (what `scripts/synth.sh dev` then `scripts/synth.sh prod` do):
the second replaces its own stage's output and keeps the first's, its cloud assembly and its rendered
Kubernetes YAML alike, never one without the other. The top-level manifest names the last synth's stages."""

from __future__ import annotations

import json

import app


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
