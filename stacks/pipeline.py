"""The optional delivery pipeline (CDK Pipelines): source from a CodeConnections repository (a full clone, for
`ops diff`), a Synth step that checks the change and synthesizes every stage, the stages in the order of
`config/_pipeline.yaml`, before the first of them `ops addon-check` for every stage with the CloudWatch add-on,
and after each stage a step that runs `ops verify` for it inside the stage's VPC (on its verify runner). A stage
marked `approval: true` first gets `ops diff` against the commit it last deployed, and each
of its stacks waits for an approval once its change set exists.

Every CodeBuild project runs on CodeBuild's standard 8.0 image with the project's toolchain selected
(`runtime-versions`: config/versions.py TOOLCHAIN) and a local cache of pip's, uv's, npm's and Go's downloads; the
CDK CLI and cdk-assets are the versions package.json pins."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_codepipeline as codepipeline
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from aws_cdk import pipelines
from constructs import Construct

from config import versions
from config.names import PIPELINE_NAME, deployed_commit_parameter, pipeline_diff_project
from config.pipeline import PipelineConfig, PipelineStage
from config.schema import StageConfig
from config.topology import VERIFY_SOURCE_KEY, install_ops_command, verify_runner_name, verify_source_bucket

from .stage import InferenceStage

CHECK_SETUP = "scripts/setup.sh --checks"
SYNTH_COMMANDS = ("scripts/pipeline_check.sh", "scripts/cdk synth --quiet")
# Where the build image keeps pip's, uv's, npm's and Go's downloads, and uv's own binary (scripts/setup.sh; HOME
# is /root on CodeBuild's standard images).
CACHE_PATHS = (
    "/root/.cache/pip/**/*",
    "/root/.cache/uv/**/*",
    "/root/.cache/pd-inference/**/*",
    "/root/.npm/**/*",
    "/root/go/pkg/mod/**/*",
    "/root/.cache/go-build/**/*",
)
# The Synth step's peak memory, measured (scripts/bench_pipeline_step.py): it needs more than SMALL's 3 GB.
SYNTH_COMPUTE = codebuild.ComputeType.MEDIUM
# Chosen, not left to aws-cdk-lib's V1 default (docs/DECISIONS.md, "The pipeline is a V2 pipeline").
PIPELINE_TYPE = codepipeline.PipelineType.V2
NO_DEPLOYED_COMMIT = "none"
# What aws-cdk-lib 2.275.0 grants on a connection of either ARN form: to the source action's role
# (aws-codepipeline-actions/lib/codestar-connections/source-action.js) and to every CodeBuild project that takes
# the full clone as input (aws-codepipeline-actions/lib/codebuild/build-action.js).
CDK_CONNECTION_ACTION = "codestar-connections:UseConnection"


def build_defaults(compute: codebuild.ComputeType = codebuild.ComputeType.SMALL) -> pipelines.CodeBuildOptions:
    """The image, the runtimes every command of the project uses, and the download cache."""
    return pipelines.CodeBuildOptions(
        build_environment=codebuild.BuildEnvironment(
            build_image=codebuild.LinuxBuildImage.STANDARD_8_0, compute_type=compute
        ),
        partial_build_spec=codebuild.BuildSpec.from_object(
            {
                "phases": {"install": {"runtime-versions": dict(versions.TOOLCHAIN)}},
                "cache": {"paths": list(CACHE_PATHS)},
            }
        ),
        cache=codebuild.Cache.local(codebuild.LocalCacheMode.CUSTOM),
    )


def synth_environment() -> codebuild.BuildEnvironment:
    """The Synth step's size (merged over build_defaults, whose image and runtimes it keeps)."""
    return codebuild.BuildEnvironment(build_image=codebuild.LinuxBuildImage.STANDARD_8_0, compute_type=SYNTH_COMPUTE)


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


def addon_check_step(stages: list[StageConfig], source: pipelines.CodePipelineSource) -> pipelines.CodeBuildStep | None:
    """preflight's CloudWatch add-on check (`ops addon-check`) for every stage of the pipeline that installs the
    add-on, before the first stage deploys: EKS refuses a configuration that its version's schema does not admit
    when CloudFormation creates or updates the add-on, and the cluster stack then rolls back whole (ops/preflight.py
    addon_configuration_check). DescribeAddonConfiguration's request names only an add-on and a version, no
    cluster (EKS API Reference), so its statement's resource is `*`."""
    names = [cfg.stage for cfg in stages if cfg.observability.enabled]
    if not names:
        return None
    return pipelines.CodeBuildStep(
        "AddonCheck",
        input=source,
        install_commands=[CHECK_SETUP],
        commands=[f".venv/bin/python -m ops addon-check --stage {name}" for name in names],
        role_policy_statements=[iam.PolicyStatement(actions=["eks:DescribeAddonConfiguration"], resources=["*"])],
    )


def diff_commands(stage: str, parameter: str) -> list[str]:
    """`ops diff` against the commit the stage last deployed (an SSM parameter the Record step writes)."""
    return [
        f'base=$(aws ssm get-parameter --name "{parameter}" --query Parameter.Value --output text)',
        "mkdir -p diff",
        (
            f'if [ "$base" = "{NO_DEPLOYED_COMMIT}" ]; then echo "{stage}: no deploy recorded yet: every stack is new" '
            f'> diff/{stage}.md; else .venv/bin/python -m ops diff --base "$base" --stage {stage} '
            f"--markdown diff/{stage}.md; fi"
        ),
        f"cat diff/{stage}.md",
    ]


def _grants(statement: dict, action: str, resource: str) -> bool:
    def listed(value: object) -> list:
        return value if isinstance(value, list) else [value]

    return action in listed(statement.get("Action")) and resource in listed(statement.get("Resource"))


def grant_connection(scope: Construct, connection_arn: str, action: str) -> None:
    """`action` on the connection for every policy that aws-cdk-lib gave CDK_CONNECTION_ACTION on it (complete once
    the pipeline is built): for a codeconnections ARN that grant alone allows nothing (config/pipeline.py
    PipelineConfig.connection_action)."""
    if action == CDK_CONNECTION_ACTION:
        return
    for policy in [c for c in scope.node.find_all() if isinstance(c, iam.Policy)]:
        statements = policy.document.to_json().get("Statement", [])
        if any(_grants(s, CDK_CONNECTION_ACTION, connection_arn) for s in statements):
            policy.add_statements(iam.PolicyStatement(actions=[action], resources=[connection_arn]))


class PipelineStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, pipeline: PipelineConfig, stages: dict[str, StageConfig], **kwargs
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        # A full clone (not a zip): `ops diff` compares git revisions.
        self.source = pipelines.CodePipelineSource.connection(
            pipeline.repository,
            pipeline.branch,
            connection_arn=pipeline.connection_arn,
            code_build_clone_output=True,
        )
        self.pipeline = pipelines.CodePipeline(
            self,
            "Pipeline",
            pipeline_name=PIPELINE_NAME,
            pipeline_type=PIPELINE_TYPE,
            synth=pipelines.CodeBuildStep(
                "Synth",
                input=self.source,
                install_commands=[CHECK_SETUP],
                commands=list(SYNTH_COMMANDS),
                primary_output_directory="cdk.out",
            ),
            code_build_defaults=build_defaults(),
            synth_code_build_defaults=pipelines.CodeBuildOptions(build_environment=synth_environment()),
            cli_version=versions.npm_pin("aws-cdk"),
            cdk_assets_cli_version=versions.npm_pin("cdk-assets"),
            cross_account_keys=True,  # a KMS key for the artifact bucket (and cross-account stages)
            enable_key_rotation=True,
        )
        self.stages: list[InferenceStage] = []
        addon_check = addon_check_step([stages[ref.name] for ref in pipeline.stages], self.source)
        for index, ref in enumerate(pipeline.stages):
            first = [addon_check] if index == 0 and addon_check else []
            self._add_stage(ref, stages[ref.name], first)
        self.pipeline.build_pipeline()  # now, so its projects exist for the compliance acknowledgments
        grant_connection(self, pipeline.connection_arn, pipeline.connection_action)

    def _add_stage(self, ref: PipelineStage, cfg: StageConfig, pre: Sequence[pipelines.Step]) -> None:
        """The stage, after `pre` (the add-on check, before the first stage), and verify after it."""
        stage = InferenceStage(self, ref.name, cfg=cfg)
        verify = verify_step(cfg, self.source)
        if not ref.approval:
            self.pipeline.add_stage(stage, pre=list(pre), post=[verify])
        else:
            parameter = self._deployed_commit(ref.name)
            diff = self._diff_step(ref.name, parameter)
            record = self._record_step(ref.name, parameter)
            record.add_step_dependency(verify)
            self.pipeline.add_stage(
                stage, pre=[*pre, diff], post=[verify, record], stack_steps=self._approvals(stage, ref.name)
            )
        self.stages.append(stage)

    def _deployed_commit(self, stage: str) -> ssm.StringParameter:
        return ssm.StringParameter(
            self,
            f"DeployedCommit-{stage}",
            parameter_name=deployed_commit_parameter(stage),
            string_value=NO_DEPLOYED_COMMIT,
            description=f"The commit the pipeline last deployed to {stage} and verified (the base of its ops diff)",
        )

    def _diff_step(self, stage: str, parameter: ssm.StringParameter) -> pipelines.CodeBuildStep:
        return pipelines.CodeBuildStep(
            f"Diff-{stage}",
            input=self.source,
            project_name=pipeline_diff_project(stage),
            install_commands=[CHECK_SETUP],
            commands=diff_commands(stage, parameter.parameter_name),
            primary_output_directory="diff",
            role_policy_statements=[
                iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[parameter.parameter_arn])
            ],
        )

    def _record_step(self, stage: str, parameter: ssm.StringParameter) -> pipelines.CodeBuildStep:
        return pipelines.CodeBuildStep(
            f"Record-{stage}",
            input=self.source,
            commands=[
                (
                    f'aws ssm put-parameter --name "{parameter.parameter_name}" --type String --overwrite '
                    '--value "$CODEBUILD_RESOLVED_SOURCE_VERSION"'
                )
            ],
            role_policy_statements=[
                iam.PolicyStatement(actions=["ssm:PutParameter"], resources=[parameter.parameter_arn])
            ],
        )

    def _approvals(self, stage: InferenceStage, name: str) -> list[pipelines.StackSteps]:
        """One approval per stack, after CloudFormation made its change set and before it runs (a stack's change
        set can exist only once the stacks it imports from are deployed)."""
        region = stage.cfg.region
        diff = (
            f"https://{region}.console.aws.amazon.com/codesuite/codebuild/projects/{pipeline_diff_project(name)}/history"
            f"?region={region}"
        )
        steps = []
        for stack in stage.stacks:
            steps.append(
                pipelines.StackSteps(
                    stack=stack,
                    change_set=[
                        pipelines.ManualApprovalStep(
                            f"Approve-{stack.stack_name}",
                            comment=f"Review {stack.stack_name}'s change set in CloudFormation, and the stage's "
                            f"ops diff (the build log of {pipeline_diff_project(name)}), before it is executed.",
                            review_url=diff,
                        )
                    ],
                )
            )
        return steps
