#!/usr/bin/env python3
"""Write or check security/cfn-execution-policy.json: the CloudFormation execution policy that covers exactly the
services the stacks create, derived from a synth of every stage file and of the example pipeline
(stacks/execution_policy.py). Give it to `cdk bootstrap --cloudformation-execution-policies` (docs/DEPLOYING.md).
    .venv/bin/python scripts/cfn_execution_policy.py            # write it
    .venv/bin/python scripts/cfn_execution_policy.py --check    # exit 1 when the committed file differs"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # as app.py: Node 20's banner
POLICY_FILE = ROOT / "security" / "cfn-execution-policy.json"


def derived() -> dict:
    from config import load_stages
    from config.pipeline import load_pipeline
    from stacks import assembly, execution_policy

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "config"
        shutil.copytree(ROOT / "config", folder, ignore=shutil.ignore_patterns("_pipeline.yaml"))
        shutil.copy(ROOT / "docs" / "pipeline.example.yaml", folder / "_pipeline.yaml")
        stages = load_stages(folder)
        app = assembly.new_app(outdir=str(Path(scratch) / "cdk.out"))
        assembly.build(app, stages, nag=False, pipeline=load_pipeline(folder, [s.stage for s in stages]))
        out = Path(app.synth().directory)
        templates = [json.loads(p.read_text()) for p in out.rglob("*.template.json")]
        return execution_policy.policy_document(execution_policy.services(templates))


def text(policy: dict) -> str:
    return json.dumps(policy, indent=2) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = parser.parse_args()
    wanted = text(derived())
    if args.check:
        if not POLICY_FILE.is_file() or POLICY_FILE.read_text() != wanted:
            print(
                f"{POLICY_FILE.relative_to(ROOT)} differs from the stacks: run scripts/cfn_execution_policy.py",
                file=sys.stderr,
            )
            return 1
        return 0
    POLICY_FILE.write_text(wanted)
    print(f"wrote {POLICY_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
