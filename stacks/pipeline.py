"""The optional delivery pipeline (CDK Pipelines): source from a CodeConnections repository, a synth
step that runs the README's test command and then synth, the stages in the order of
`config/_pipeline.yaml`, a manual approval before each stage marked `approval: true`, and after each
stage a step that runs `ops verify` for it inside the stage's VPC (on its verify runner)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import pipelines
from constructs import Construct

from config.names import PIPELINE_NAME
from config.pipeline import PipelineConfig
from config.schema import StageConfig
from config.topology import VERIFY_SOURCE_KEY, install_ops_command, verify_runner_name, verify_source_bucket

from .stage import InferenceStage

TEST_COMMAND = "scripts/test.sh"
SYNTH_COMMAND = "npx --no-install cdk synth --quiet"


def verify_step(stage: StageConfig, source: pipelines.CodePipelineSource) -> pipelines.CodeBuildStep:
    name = verify_runner_name(stage.stage)
    account, region = stage.account or cdk.Aws.ACCOUNT_ID, stage.region
    bucket = verify_source_bucket(stage.stage, account, region)
    return pipelines.CodeBuildStep(
        f"Verify-{stage.stage}",
        input=source,
        install_commands=["python3 -m venv .ops", install_ops_command(".ops")],
        commands=[f".ops/bin/python -m ops verify-remote --stage {stage.stage}"],
        role_policy_statements=[
            iam.PolicyStatement(actions=["s3:PutObject"], resources=[f"arn:aws:s3:::{bucket}/{VERIFY_SOURCE_KEY}"]),
            iam.PolicyStatement(
                actions=["codebuild:StartBuild", "codebuild:BatchGetBuilds"],
                resources=[f"arn:aws:codebuild:{region}:{account}:project/{name}"],
            ),
        ],
    )


class PipelineStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, pipeline: PipelineConfig, stages: dict[str, StageConfig], **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        source = pipelines.CodePipelineSource.connection(
            pipeline.repository, pipeline.branch, connection_arn=pipeline.connection_arn
        )
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=PIPELINE_NAME,
            synth=pipelines.ShellStep(
                "Synth", input=source, commands=[TEST_COMMAND, SYNTH_COMMAND], primary_output_directory="cdk.out"
            ),
            code_build_defaults=pipelines.CodeBuildOptions(
                build_environment=codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_7_0)
            ),
            cross_account_keys=True,  # a KMS key for the artifact bucket (and cross-account stages)
            enable_key_rotation=True,
        )
        self.stages: list[InferenceStage] = []
        for ref in pipeline.stages:
            cfg = stages[ref.name]
            stage = InferenceStage(self, ref.name, cfg=cfg)
            pre = (
                [
                    pipelines.ManualApprovalStep(
                        f"Approve-{ref.name}", comment=f"Deploy {ref.name}? Review the diff of this change first."
                    )
                ]
                if ref.approval
                else []
            )
            self.pipeline.add_stage(stage, pre=pre, post=[verify_step(cfg, source)])
            self.stages.append(stage)
        self.pipeline.build_pipeline()  # now, so its projects exist for the compliance acknowledgments
