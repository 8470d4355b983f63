"""The optional delivery pipeline: `config/_pipeline.yaml` (files starting with `_` are not stages).

Same strictness and one-line errors as the stage files. Without the file, the app has no pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from .errors import ConfigError, short
from .loader import load_model
from .schema import ACCOUNT, NAME, REGION, Strict

PIPELINE_FILE = "_pipeline.yaml"
CONNECTION_ARN = (
    r"^arn:aws(-[a-z]+)*:(codeconnections|codestar-connections):[a-z0-9-]+:[0-9]{12}:connection/[A-Za-z0-9-]+$"
)


def _git_branch(value: str) -> str:
    """A branch name git accepts (git check-ref-format's rules that the pattern's characters can break)."""
    parts = value.split("/")
    if (
        any(not part or part.startswith(".") or part.endswith(".lock") for part in parts)
        or ".." in value
        or value.endswith(".")
        or value.startswith("-")
    ):
        raise ValueError(
            f"{short(value)} is not a branch name git accepts (no empty part between '/', no part starting with '.' "
            "or ending in '.lock', no '..', no '.' at the end, no '-' at the start)"
        )
    return value


def _repository(value: str) -> str:
    """OWNER/NAME as the connection's FullRepositoryId: neither part '.' or '..', and an owner (a GitHub user or
    organization) not starting with '-'; a repository's own name may (GitHub allows `-x`)."""
    owner, _, name = value.partition("/")
    if owner in (".", "..") or name in (".", "..") or owner.startswith("-"):
        raise ValueError(
            f"{short(value)} is not OWNER/NAME of a repository (no part '.' or '..', no owner starting with '-')"
        )
    return value


class PipelineStage(Strict):
    name: Annotated[str, Field(pattern=NAME)]
    approval: bool = False  # a manual approval before this stage deploys


class PipelineConfig(Strict):
    account: Annotated[str, Field(pattern=ACCOUNT)] | None = None
    region: Annotated[str, Field(pattern=REGION)]
    connection_arn: Annotated[str, Field(pattern=CONNECTION_ARN)]
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"), AfterValidator(_repository)]
    branch: Annotated[str, Field(pattern=r"^[A-Za-z0-9_./-]+$", max_length=200), AfterValidator(_git_branch)] = "main"
    stages: list[PipelineStage] = Field(min_length=1, max_length=20)

    @property
    def connection_action(self) -> str:
        """The IAM action that lets a role use the connection: UseConnection under the ARN's own service prefix,
        codeconnections or codestar-connections. "When specifying a resource in the IAM policy, the service prefix
        needs to match that of the resource" (AWS Developer Tools console user guide, "Connections rename -
        Summary of changes"; the console makes codeconnections ARNs since 2024-07-01)."""
        return f"{self.connection_arn.split(':')[2]}:UseConnection"


def load_pipeline(config_dir: str | Path, stage_names: list[str]) -> PipelineConfig | None:
    """The pipeline config if `_pipeline.yaml` exists, checked against the stage files present."""
    path = Path(config_dir) / PIPELINE_FILE
    if not path.exists():
        return None
    shown = str(path)
    cfg = load_model(path, PipelineConfig, "pipeline")
    seen: set[str] = set()
    for index, stage in enumerate(cfg.stages):
        if stage.name not in stage_names:
            raise ConfigError(
                shown, f"stages[{index}].name", f"{stage.name!r} has no stage file (allowed: {', '.join(stage_names)})"
            )
        if stage.name in seen:
            raise ConfigError(shown, f"stages[{index}].name", f"{stage.name!r} is listed twice (each stage once)")
        seen.add(stage.name)
    return cfg
