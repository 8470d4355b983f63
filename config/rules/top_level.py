"""Rules of the stage file's top-level keys (docs/STAGE_FILE.md, "Top level"): the AZs of the region, the
names the app derives from the stage, ARNs in the stage's partition, region and account, the tag keys, and
stages of one folder that would give one AWS name twice."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .. import names
from ..errors import ConfigError, short
from ..regions import partition_of, regions_table
from ..schema import StageConfig


def zones_of_region(cfg: StageConfig, path: str) -> None:
    # fullmatch, not match with `$`: "us-west-2a\n" is not an AZ
    pattern = re.compile(rf"{re.escape(cfg.region)}[a-z]")
    for index, zone in enumerate(cfg.availability_zones):
        if not pattern.fullmatch(zone):
            raise ConfigError(
                path,
                f"availability_zones[{index}]",
                f"{short(zone)} is not an AZ of region {cfg.region} (allowed: {cfg.region}a, {cfg.region}b, ...)",
            )
    if len(set(cfg.availability_zones)) != len(cfg.availability_zones):
        raise ConfigError(path, "availability_zones", "an AZ is listed twice (each AZ once)")
    if cfg.gpu_availability_zone not in cfg.availability_zones:
        raise ConfigError(
            path,
            "gpu_availability_zone",
            f"{short(cfg.gpu_availability_zone)} is not one of the stage's availability_zones "
            f"(allowed: {', '.join(cfg.availability_zones)})",
        )


def derived_names(cfg: StageConfig, path: str) -> None:
    """Every name the app derives from the stage (config/names.py) within AWS's limit for it."""
    for name in names.for_stage(cfg):
        if name.too_long:
            room = (
                f"so {name.field} of at most {name.room} characters here"
                if name.room >= 2
                else f"and the rest of the name alone is {len(name.value) - len(name.source)} characters: "
                f"a shorter region or name"
            )
            raise ConfigError(
                path,
                name.field,
                f"{short(name.source)} makes {name.what} {name.value!r} {len(name.value)} characters "
                f"long (allowed: at most {name.limit}, {room})",
            )
        if not name.well_formed:
            raise ConfigError(
                path,
                name.field,
                f"{short(name.source)} makes {name.what} {name.value!r}, which AWS "
                f"does not accept (allowed: {name.pattern})",
            )


def same_region_and_account(
    cfg: StageConfig,
    path: str,
    field: str,
    arn: str,
    *,
    what: str,
    allowed_region: str,
    allowed_account: str,
    region_reason: str = "",
) -> None:
    """An ARN of the stage's region and (when the stage names one) its account; one line naming the field."""
    region, account = arn.split(":")[3:5]
    if region != cfg.region:
        raise ConfigError(
            path,
            field,
            f"the {what} is in {region}, the stage in {cfg.region}{region_reason} (allowed: {allowed_region})",
        )
    if cfg.account and account != cfg.account:
        raise ConfigError(
            path, field, f"the {what} is in account {account}, the stage in {cfg.account} (allowed: {allowed_account})"
        )


# --- Across the stage files of one folder --------------------------------------------------------------


def check_together(stages: Sequence[tuple[StageConfig, str]]) -> None:
    """No two stages may give one AWS name (config/names.py) to two resources in one account and region.
    An unset `account` is the account of the deploy-time credentials: it may be any account, so it
    collides with every account. The line names the file whose setting to change and the other file."""
    for later, (cfg, path) in enumerate(stages):
        for other, other_path in stages[:later]:
            if cfg.region != other.region or (cfg.account and other.account and cfg.account != other.account):
                continue
            theirs = {(n.kind, n.value): n for n in names.for_stage(other)}
            for name in names.for_stage(cfg):
                clash = theirs.get((name.kind, name.value))
                if clash is None:
                    continue
                # Report in the file that set the name explicitly (cluster.name), else in the later file.
                if clash.field == "cluster.name" and name.field != "cluster.name":
                    here, mine, there, theirs_name = other_path, clash, path, name
                else:
                    here, mine, there, theirs_name = path, name, other_path, clash
                account = cfg.account or other.account or "any account: account is unset"
                raise ConfigError(
                    here,
                    mine.field,
                    f"{mine.what} {mine.value!r} is also {theirs_name.what} of {there}, in the same "
                    f"account and region ({account}, {cfg.region}) (allowed: a {mine.field} that "
                    "gives no name another stage file there gives)",
                )


def zone_letters(cfg: StageConfig, path: str) -> None:
    """The AZ letter is checked against a-f only (config/regions.json says why): whether this account has
    that AZ in this region is not checked here."""
    letters = regions_table()["availability_zone_letters"]
    for index, zone in enumerate(cfg.availability_zones):
        letter = zone[len(cfg.region) :]
        if letter not in letters:
            raise ConfigError(
                path,
                f"availability_zones[{index}]",
                f"{short(zone)} names AZ letter {short(letter)}: no region has more than six AZs "
                f"(us-east-1 has six) (allowed: {cfg.region}{letters[0]} to {cfg.region}{letters[-1]}, "
                "of those the account has)",
            )


def arn_partitions(cfg: StageConfig, path: str) -> None:
    """Every ARN field is in the partition of the stage's region (arn:aws-cn:... names nothing in us-west-2)."""
    expected = partition_of(cfg.region)
    fields: list[tuple[str, str | None]] = [
        (f"cluster.admin_principal_arns[{index}]", arn) for index, arn in enumerate(cfg.cluster.admin_principal_arns)
    ]
    fields += [
        ("observability.alarm_topic_arn", cfg.observability.alarm_topic_arn),
        ("serving.hf_token_secret", cfg.serving.hf_token_secret),
    ]
    for field, arn in fields:
        if not arn or not arn.startswith("arn:"):
            continue
        partition = arn.split(":")[1]
        if partition != expected:
            raise ConfigError(
                path,
                field,
                f"the ARN is in partition {partition}, the stage's region "
                f"{cfg.region} in {expected} (allowed: arn:{expected}:...)",
            )


def tag_keys(cfg: StageConfig, path: str) -> None:
    """Tag keys are case-sensitive in the tagging APIs, but IAM compares them case-insensitively (IAM User
    Guide, "Tags for AWS Identity and Access Management resources", Case sensitivity), and the stage's tags
    reach every resource of the stage (stacks/stage.py cdk.Tags.of), the IAM roles too: `Team` and `team` on
    one role fails the deploy, and cost reports show two columns for one key."""
    seen: dict[str, str] = {}
    for key in cfg.tags:
        folded = key.casefold()
        if folded in seen:
            raise ConfigError(
                path,
                f"tags.{key}",
                f"differs from tags.{seen[folded]} only in case: IAM treats the two "
                "as one key (allowed: each key once, in one spelling)",
            )
        seen[folded] = key


def stage_tag(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when tags.stage names another stage: a stage file copied from another kept its tag, which
    every resource of this stage then carries (stacks/stage.py cdk.Tags.of), in cost reports too."""
    tagged = cfg.tags.get("stage")
    if tagged is None or tagged == cfg.stage:
        return None
    return (
        "tags.stage",
        (
            f"{short(tagged)} names another stage than this file's ({cfg.stage}): every resource of {cfg.stage} carries "
            f"it, and cost reports count them under {short(tagged)} (fix: stage: {cfg.stage})"
        ),
    )
