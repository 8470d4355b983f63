"""The app's settings (stacks/assembly.py): what CDK records beside the templates."""

from __future__ import annotations

import json


def test_the_assembly_metadata_records_no_creation_stacks(app_synth):
    # from Python a creation stack is only jsii's internals; capturing it costs synth time
    metadata = [json.loads(path.read_text()) for path in app_synth.outdir.rglob("*.metadata.json")]
    entries = [entry for document in metadata for entries in document.values() for entry in entries]
    kinds = {entry["type"] for entry in entries}
    assert "aws:cdk:logicalId" in kinds and "aws:cdk:creationStack" not in kinds
