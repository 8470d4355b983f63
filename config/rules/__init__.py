"""The rules across fields of a stage file, one module per section of it (docs/STAGE_FILE.md): top_level,
network, cluster, system_nodegroup, gpu_nodegroup, serving and its subsections, benchmark, observability. Each
rule takes (cfg, path), returns on success and raises ConfigError naming the field on failure.

STAGE_RULES is the one order they run in: the first failure is the error a stage gets (tests pin it). The warnings
(STAGE_WARNINGS) take a valid stage and return (field, problem) or None: stage_warnings() is every command's list of
them (the loader prints them, synth annotates them on the stage's cluster stack: stacks/stage.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import warning_line
from ..schema import StageConfig

# The secret shapes (config/secret_shapes.py) and the whole-file refusal, re-exported for the loader and
# config/secret_scan.py, which scans every synth output for the same shapes.
from ..secret_shapes import AWS_SECRET_RUN, KEY_CONTEXT, SECRET_SHAPES, secret_kind, secret_like_key  # noqa: F401
from . import (
    benchmark,
    cluster,
    gpu_nodegroup,
    network,
    observability,
    serving,
    serving_engine,
    serving_model,
    serving_resources,
    serving_roles,
    system_nodegroup,
    top_level,
    weight_cache,
)
from .secret_values import MAX_STRING_CHARS, refuse_secrets  # noqa: F401
from .top_level import check_together  # noqa: F401

StageRule = Callable[[StageConfig, str], None]
StageWarning = Callable[[StageConfig], "tuple[str, str] | None"]

STAGE_RULES: tuple[StageRule, ...] = (
    top_level.zones_of_region,
    top_level.derived_names,
    network.nat_gateways_and_subnets,
    cluster.public_endpoint,
    cluster.admin_principals,
    cluster.admin_access,
    system_nodegroup.type_sizes_and_volume,
    gpu_nodegroup.type_sizes_and_efa,
    serving.image_reference,
    serving.kv_transport,
    serving.kv_transfer_floor,
    serving_roles.role_engine_blocks,
    serving_model.model_source,
    serving_model.model_access,
    observability.alarm_thresholds,  # before a fixed KV cache's alarm room: the threshold itself first
    serving_roles.serving_capacity,
    serving_model.weights_fit,
    serving_resources.pod_resources,
    serving_resources.efa_buffers,
    serving_engine.gdn_prefill_kernel,
    serving.hf_token_secret,
    serving.serving_namespace,
    serving.client_namespaces,
    weight_cache.weight_cache,
    benchmark.context_fits,
    observability.alarm_topic,
    top_level.zone_letters,
    top_level.arn_partitions,
    network.vpc_range,
    top_level.tag_keys,
    serving_engine.unsafe_engine_args,
    serving_engine.pinned_revisions,
    serving_engine.role_identity,
    serving_engine.role_tp_pairing,
    serving_engine.cuda_graph_mode,
    gpu_nodegroup.root_volume_for_model,  # last: a model too large, or an engine it cannot run, is fixed first
)
STAGE_WARNINGS: tuple[StageWarning, ...] = (
    top_level.stage_tag,
    cluster.open_endpoint,
    serving_roles.idle_gpus,
    serving_model.model_id_mismatch,
    serving.unused_stream_batching,
)
# What the example stages ship as placeholders: printed by `validate` only (every command reads the examples).
PLACEHOLDER_WARNINGS: tuple[StageWarning, ...] = (cluster.no_admin_principal, cluster.placeholder_endpoint_cidrs)


def check(cfg: StageConfig, path: str) -> None:
    for rule in STAGE_RULES:
        rule(cfg, path)


@dataclass(frozen=True)
class Warned:
    id: str  # its CDK annotation's, from the rule's name: pd-inference:open-endpoint (cdk synth shows it)
    field: str
    problem: str


def stage_warnings(cfg: StageConfig) -> list[Warned]:
    """What a valid stage allows but is most likely a mistake, in STAGE_WARNINGS' order."""
    found = [(rule.__name__, rule(cfg)) for rule in STAGE_WARNINGS]
    return [Warned(f"pd-inference:{name.replace('_', '-')}", *hit) for name, hit in found if hit]


def warnings(cfg: StageConfig, path: str) -> list[str]:
    """The warning lines of a valid stage (errors.warning_line), as `config validate` and the loader print them."""
    return [warning_line(path, warned.field, warned.problem) for warned in stage_warnings(cfg)]


def placeholder_warnings(cfg: StageConfig, path: str) -> list[str]:
    """The warning lines `validate` prints for what the example stages ship as placeholders (nobody can use the
    cluster, an endpoint range nobody comes from): fine to synthesize, not to deploy as they are."""
    found = [rule(cfg) for rule in PLACEHOLDER_WARNINGS]
    return [warning_line(path, field, problem) for field, problem in filter(None, found)]
