"""Every AWS name the app derives from a stage file, in one place, with the limit AWS sets on it.

The resources the stacks name explicitly (every `*_name=` argument and `"Name"` property in stacks/):

| resource | name | where | AWS limit |
|---|---|---|---|
| CloudFormation stacks | `<stage>-network`, `<stage>-cluster`, `<stage>-serving` | stacks/stage.py | 128, `[A-Za-z][A-Za-z0-9-]*` |
| EKS cluster | `cluster.name`, default `pd-inference-<stage>` | stacks/cluster.py | 100, `[0-9A-Za-z][A-Za-z0-9_-]*` |
| CloudWatch log group (control plane) | `/aws/eks/<cluster>/cluster` (EKS's own name) | stacks/cluster.py | 512, `[.\\-_/#A-Za-z0-9]+` |
| CloudWatch log groups (Container Insights) | `/aws/containerinsights/<cluster>/<kind>` (the add-on's own names) | stacks/observability.py | 512, as above |
| CodeBuild project (verify runner) | `pd-inference-<stage>-verify` | stacks/verify_runner.py | 2 to 150, `[A-Za-z0-9][A-Za-z0-9_-]*` |
| S3 bucket (verify runner source) | `pd-inference-<stage>-verify-<account>-<region>` | stacks/verify_runner.py | 3 to 63, lowercase |
| pipeline stack / CodePipeline | `pd-inference-pipeline` / `pd-inference` | stacks/assembly.py, stacks/pipeline.py | fixed, not per stage |

Everything else (IAM roles, KMS keys, the flow-log, Lambda and verify-runner log groups, Lambda functions,
security groups, the launch template) is named by CloudFormation from the logical id, which it shortens
to each service's limit itself, so no stage file can make those too long. The app gives no IAM role an
explicit name.

No imports from the rest of the package: schema.py, topology.py and the stacks can all import this.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "pd-inference"
STACK_PARTS = ("network", "cluster", "serving")
PIPELINE_STACK = f"{PREFIX}-pipeline"
PIPELINE_NAME = PREFIX
# What the S3 bucket name holds where the account will be: an account id is always 12 digits, so a
# stage without `account` gets the length of the name right before the account is known.
ACCOUNT_PLACEHOLDER = "<account-id>"
assert len(ACCOUNT_PLACEHOLDER) == 12

# Tags: AWS allows 50 user tags per resource (tags with the reserved `aws:` prefix do not count). The app
# adds up to 4 of its own to one resource (the VPC construct's subnets: Name, aws-cdk:subnet-name,
# aws-cdk:subnet-type and kubernetes.io/role/elb or internal-elb; tests/config/test_safety.py checks the
# synthesized templates), so a stage file may add 46.
AWS_TAGS_PER_RESOURCE = 50
APP_TAGS_PER_RESOURCE = 4
MAX_STAGE_TAGS = AWS_TAGS_PER_RESOURCE - APP_TAGS_PER_RESOURCE


def stack_name(stage: str, part: str) -> str:
    """The CloudFormation stack name of one of a stage's stacks (`part`: network, cluster, serving)."""
    if part not in STACK_PARTS:
        raise ValueError(f"unknown stack part {part!r}")
    return f"{stage}-{part}"


def default_cluster_name(stage: str) -> str:
    return f"{PREFIX}-{stage}"


def cluster_name(stage: str, configured: str | None = None) -> str:
    return configured or default_cluster_name(stage)


def control_plane_log_group(cluster: str) -> str:
    """EKS writes control-plane logs to exactly this group; the cluster stack creates it first."""
    return f"/aws/eks/{cluster}/cluster"


# The groups the CloudWatch Observability add-on's agents and Fluent Bit write to; the cluster stack creates
# them first (retention, encryption, the NIXL metric filter).
CONTAINER_INSIGHTS_LOG_KINDS = ("application", "dataplane", "host", "performance", "prometheus")


def container_insights_log_group(cluster: str, kind: str) -> str:
    """Container Insights' fixed group name for one kind of its logs."""
    if kind not in CONTAINER_INSIGHTS_LOG_KINDS:
        raise ValueError(f"unknown Container Insights log kind {kind!r}")
    return f"/aws/containerinsights/{cluster}/{kind}"


def verify_runner_name(stage: str) -> str:
    """The CodeBuild project (and the prefix of its source bucket) that runs `ops verify` in the VPC."""
    return f"{PREFIX}-{stage}-verify"


def pipeline_diff_project(stage: str) -> str:
    """The pipeline's CodeBuild project that runs `ops diff` before an approved stage (a stage name is at most 20
    characters: far inside CodeBuild's 255)."""
    return f"{PIPELINE_NAME}-diff-{stage}"


def deployed_commit_parameter(stage: str) -> str:
    """The SSM parameter holding the commit the pipeline last deployed to a stage and verified."""
    return f"/{PIPELINE_NAME}/{stage}/deployed-commit"


def verify_source_bucket(stage: str, account: str | None, region: str) -> str:
    """The verify runner's source bucket (stacks/verify_runner.py builds it from the deploy-time account
    and region). Without an explicit account, ACCOUNT_PLACEHOLDER stands in for it (same length)."""
    return f"{verify_runner_name(stage)}-{account or ACCOUNT_PLACEHOLDER}-{region}"


@dataclass(frozen=True)
class DerivedName:
    """One name the app gives an AWS resource, and the stage-file field it comes from."""

    kind: str  # the resource type; two names of one kind in one account and region collide
    what: str  # for messages: "the CloudFormation stack name of the network stack"
    value: str
    limit: int  # AWS's maximum length
    pattern: str  # what AWS accepts (Python re, full match)
    field: str  # the stage-file field to change: "stage" or "cluster.name"
    source: str  # that field's value: the part of `value` the stage file controls

    @property
    def too_long(self) -> bool:
        return len(self.value) > self.limit

    @property
    def room(self) -> int:
        """The longest `field` value that keeps this name within its limit."""
        return self.limit - (len(self.value) - len(self.source))

    @property
    def well_formed(self) -> bool:
        return re.fullmatch(self.pattern, self.value.replace(ACCOUNT_PLACEHOLDER, "0" * 12)) is not None


STACK_PATTERN = r"[A-Za-z][A-Za-z0-9-]*"
CLUSTER_PATTERN = r"[0-9A-Za-z][A-Za-z0-9_-]*"
LOG_GROUP_PATTERN = r"[.\-_/#A-Za-z0-9]+"
CODEBUILD_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{1,}"
# S3 general purpose buckets: lowercase letters, digits, dots and hyphens, starting and ending with a
# letter or digit (the app never uses dots).
BUCKET_PATTERN = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"


def derived_names(
    stage: str, configured_cluster_name: str | None, account: str | None, region: str
) -> list[DerivedName]:
    """Every name of the table above for one stage, in the order the stacks create them."""
    cluster = cluster_name(stage, configured_cluster_name)
    cluster_field, cluster_source = ("cluster.name", cluster) if configured_cluster_name else ("stage", stage)
    names = [
        DerivedName(
            "cloudformation-stack",
            f"the CloudFormation stack name of the {part} stack",
            stack_name(stage, part),
            128,
            STACK_PATTERN,
            "stage",
            stage,
        )
        for part in STACK_PARTS
    ]
    names += [
        DerivedName(
            "eks-cluster", "the EKS cluster name", cluster, 100, CLUSTER_PATTERN, cluster_field, cluster_source
        ),
        DerivedName(
            "log-group",
            "the control-plane log group name",
            control_plane_log_group(cluster),
            512,
            LOG_GROUP_PATTERN,
            cluster_field,
            cluster_source,
        ),
        DerivedName(
            "codebuild-project",
            "the verify runner's CodeBuild project name",
            verify_runner_name(stage),
            150,
            CODEBUILD_PATTERN,
            "stage",
            stage,
        ),
        DerivedName(
            "s3-bucket",
            "the verify runner's S3 bucket name",
            verify_source_bucket(stage, account, region),
            63,
            BUCKET_PATTERN,
            "stage",
            stage,
        ),
    ]
    return names


def for_stage(cfg) -> list[DerivedName]:
    return derived_names(cfg.stage, cfg.cluster.name, cfg.account, cfg.region)
