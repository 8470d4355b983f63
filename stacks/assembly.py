"""Build every stage into a CDK app, with cdk-nag and its acknowledgments: shared by app.py and tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import aws_cdk as cdk

from config.names import PIPELINE_STACK
from config.pipeline import PipelineConfig
from config.schema import StageConfig

from . import compliance
from .stage import InferenceStage

# CDK feature flags, in code rather than cdk.json so that `python app.py`, `cdk synth` and the tests
# build the very same app. Context from the CLI still takes precedence.
FEATURE_FLAGS: dict[str, Any] = {
    "@aws-cdk/core:checkSecretUsage": True,
    "@aws-cdk/core:target-partitions": ["aws"],
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    # Exports between the network, cluster and serving stacks stay protected (CDK's current default).
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
}
# CDK records where each CloudFormation element was created (`aws:cdk:creationStack` in the assembly's
# *.metadata.json, never in a template). From Python that record is only "...jsii runtime, node internals...",
# and capturing it costs about 0.025 s a synth. `CDK_DEBUG=true` turns it back on (aws-cdk-lib 2.275
# core/lib/cfn-element.js: the context key or debug mode decides).
NO_CREATION_STACKS = {"aws:cdk:disable-creation-stack-traces": True}


def new_app(context: dict[str, Any] | None = None, outdir: str | None = None) -> cdk.App:
    """- builtin CloudFormation validation off: cfn-lint runs in the test suite with every rule, and CDK's
      built-in copy of it would add ~5 s a synth;
    - construct stack traces and creation stacks off: from Python they only ever show jsii's internals, and
      recording them costs time on every construct;
    - version reporting off: no AWS::CDK::Metadata resource (and no usage data sent to AWS)."""
    return cdk.App(
        builtin_cloud_formation_validation=False,
        stack_traces=False,
        analytics_reporting=False,
        context={**FEATURE_FLAGS, **NO_CREATION_STACKS, **(context or {})},
        outdir=outdir,
    )


def build(
    app: cdk.App, stages: Iterable[StageConfig], *, nag: bool = True, pipeline: PipelineConfig | None = None
) -> list[InferenceStage]:
    """One InferenceStage per config (for `cdk deploy 'STAGE/*'`), the pipeline stack when configured
    (it holds its own instances of the pipeline's stages); with `nag`, cdk-nag checks the whole app."""
    stages = list(stages)
    built = [InferenceStage(app, cfg.stage, cfg=cfg) for cfg in stages]
    checked = list(built)
    if pipeline is not None:
        from .pipeline import PipelineStack  # CDK Pipelines and CodeBuild load only when a pipeline is configured

        pipeline_stack = PipelineStack(
            app,
            "Pipeline",
            stack_name=PIPELINE_STACK,
            pipeline=pipeline,
            stages={cfg.stage: cfg for cfg in stages},
            env=cdk.Environment(account=pipeline.account, region=pipeline.region),
        )
        checked += pipeline_stack.stages
        if nag:
            compliance.acknowledge_pipeline(pipeline_stack.pipeline)
    if nag:
        compliance.enable_checks(app)
        for stage in checked:
            compliance.acknowledge_findings(stage.cluster)
    return built
