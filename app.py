#!/usr/bin/env python3
"""The CDK app: one cdk.Stage per stage file in config/ (or only `-c stage=NAME`).

Context: `stage` (one stage), `config_dir` (another folder of stage files), `nag` (run cdk-nag; cdk.json
turns it on for every `cdk` command, so synth, diff and deploy all gate on it). The delivery pipeline is
built when `config/_pipeline.yaml` exists and no single stage is asked for.

The only place that reads CDK context. A bad stage file stops here with one line and exit code 2,
before any construct exists, so no half-written cloud assembly is left behind.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import synth_process

synth_process.configure_environment()  # before aws_cdk starts jsii's node process
with synth_process.imports_without_gc():
    from charts import render
    from config import CONFIG_DIR, ConfigError, load_stages
    from config.pipeline import load_pipeline
    from ops import secret_scan
    from stacks import assembly


def main(context: Optional[dict] = None, outdir: Optional[str] = None) -> int:
    """`context`/`outdir` are for in-process callers (tests); the CDK CLI passes both in the
    environment (CDK_CONTEXT_JSON, CDK_OUTDIR), which cdk.App reads itself."""
    app = assembly.new_app(context, outdir)
    only = app.node.try_get_context("stage")
    config_dir = app.node.try_get_context("config_dir") or CONFIG_DIR
    try:
        stages = load_stages(config_dir, only=only)
        pipeline = None if only else load_pipeline(config_dir, [cfg.stage for cfg in stages])
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    built = assembly.build(app, stages, nag=_truthy(app.node.try_get_context("nag")), pipeline=pipeline)
    try:
        app.synth()
    except RuntimeError as exc:  # a validation plugin (cdk-nag) failed; its report is printed above
        if "ValidationFailed" not in str(exc):
            raise
        print(f"synth: {exc}", file=sys.stderr)
        return 1
    # cdk.out holds exactly this synth's stages: the assemblies (and k8s/ folders) of stages an earlier
    # synth into the same folder built, and this one did not, are removed.
    assembly.remove_stale_assemblies(app.outdir)
    render.write(app.outdir, [stage.rendering() for stage in built])
    # Nothing secret-shaped may leave a synth (templates, manifests, rendered YAML): a finding fails it,
    # naming the file, line and kind, never the value. The stage files are checked before (config/rules.py).
    findings = secret_scan.scan(Path(app.outdir))
    if findings:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        print(f"synth: {Path(app.outdir) / findings[0].path}:{findings[0].line}: {findings[0].kind} in the "
              f"output{more}: remove it from the stage file or the code that put it there (value not shown)",
              file=sys.stderr)
        return 1
    return 0


def _truthy(value: object) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")


if __name__ == "__main__":
    synth_process.exit_now(main())  # no interpreter teardown: synth_process.py
