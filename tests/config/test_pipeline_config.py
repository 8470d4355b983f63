"""The pipeline file's derived values (config/pipeline.py)."""

from __future__ import annotations

import pytest
import yaml

from config.errors import ConfigError
from config.pipeline import PipelineConfig, load_pipeline


@pytest.mark.parametrize(
    ("service", "action"),
    [
        ("codeconnections", "codeconnections:UseConnection"),
        ("codestar-connections", "codestar-connections:UseConnection"),
    ],
)
def test_the_connection_is_used_under_its_arns_own_service_prefix(service, action):
    arn = f"arn:aws:{service}:us-west-2:123456789012:connection/00000000-0000-0000-0000-000000000000"
    cfg = PipelineConfig(region="us-west-2", connection_arn=arn, repository="o/r", stages=[{"name": "dev"}])
    assert cfg.connection_action == action


def _pipeline_file(folder, **fields) -> None:
    arn = "arn:aws:codeconnections:us-west-2:123456789012:connection/abc"
    data = {"region": "us-west-2", "connection_arn": arn, "repository": "o/r", "stages": [{"name": "dev"}], **fields}
    (folder / "_pipeline.yaml").write_text(yaml.safe_dump(data))


@pytest.mark.parametrize("branch", ["..", "a..b", "-x", "a/", "/a", "a//b", ".hidden", "feature/.x", "x.lock", "a."])
def test_a_branch_git_would_refuse_is_refused_by_name(tmp_path, branch):
    _pipeline_file(tmp_path, branch=branch)
    with pytest.raises(ConfigError) as caught:
        load_pipeline(tmp_path, ["dev"])
    assert str(caught.value).startswith(f"{tmp_path / '_pipeline.yaml'}: branch: {branch!r} is not a branch name git")


@pytest.mark.parametrize("repository", ["./r", "o/..", "-o/r", "../r"])
def test_a_repository_part_that_is_a_path_step_or_an_option_is_refused(tmp_path, repository):
    _pipeline_file(tmp_path, repository=repository)
    with pytest.raises(ConfigError, match=r": repository: .* is not OWNER/NAME of a repository"):
        load_pipeline(tmp_path, ["dev"])


@pytest.mark.parametrize(
    "branch, repository", [("release/1.2", "org.x/repo.git"), ("main", "o_1/r-2"), ("main", "o/-x")]
)
def test_ordinary_branches_and_repositories_pass(tmp_path, branch, repository):
    _pipeline_file(tmp_path, branch=branch, repository=repository)
    cfg = load_pipeline(tmp_path, ["dev"])
    assert cfg is not None and (cfg.branch, cfg.repository) == (branch, repository)
