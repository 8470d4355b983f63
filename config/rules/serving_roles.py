"""Rules of the `serving.{prefill,decode}` sections (docs/STAGE_FILE.md): a role's own engine block, and the
replicas of both roles within the GPU nodes."""

from __future__ import annotations

from ..derived import (
    PARALLEL_FACTORS,
    Parallelism,
    gpu_spec,
    idle_gpu_count,
    parallel_setting,
    parallelism,
)
from ..errors import ConfigError, short
from ..schema import MAX_EXTRA_ARGS, ROLES, StageConfig
from .serving_engine_tuning import engine_memory, parallel_layout, scheduler_limits


def role_engine_blocks(cfg: StageConfig, path: str) -> None:
    """A role's own engine block (serving.prefill.engine, serving.decode.engine) exists in PD mode only: a colocated
    engine does both phases, and serving.engine alone applies to it. Merged over serving.engine, a role's extra_args
    stay within the MAX_EXTRA_ARGS one engine takes (the merge itself: config/schema.py merged_engine)."""
    serving = cfg.serving
    for role in ROLES:
        block = getattr(serving, role).engine
        if block is None:
            continue
        if serving.mode != "pd":
            raise ConfigError(
                path,
                f"serving.{role}.engine",
                f"a per-role engine block in {serving.mode} mode, where one engine does both phases and "
                "serving.engine alone applies (allowed: the settings in serving.engine; per-role engine blocks "
                "only with serving.mode: pd)",
            )
        merged = {**serving.engine.extra_args, **block.extra_args}
        if len(merged) > MAX_EXTRA_ARGS:
            raise ConfigError(
                path,
                f"serving.{role}.engine.extra_args",
                f"{len(merged)} extra engine arguments together with serving.engine.extra_args (allowed: at most "
                f"{MAX_EXTRA_ARGS} for one engine, counting each name once)",
            )


# --- GPUs per replica ---------------------------------------------------------------------------------------
# config/derived.py PARALLEL_FACTORS: one replica takes TP x PP x PCP x DP GPUs. The TP ranks of an engine
# share one node (one worker pod per GPU node, no NVLink across nodes; charts/serve_config.py TP_PLACEMENT); its PP
# stages, PCP ranks and DP ranks are units of TP GPUs each, which Ray places on any node with room.


def _fits(par: Parallelism, node_gpus: int, nodes: int) -> tuple[int, int]:
    """(units of TP GPUs one replica needs, units the cluster holds)."""
    return par.replica_gpus // par.tensor, (node_gpus // par.tensor) * nodes


def _packs(groups: list[tuple[int, int]], node_gpus: int, nodes: int) -> bool:
    """Whether `count` groups of `size` GPUs each, for every (size, count), fit `nodes` nodes of `node_gpus` GPUs
    with each group on one node: the largest groups first, each node filled in turn (first fit decreasing). Exact
    when every size divides the next larger one and the node's GPU count (1, 2, 4, 8: every TP size on every GPU
    node type here); otherwise it may refuse a packing that a cleverer order finds."""
    free = [node_gpus] * nodes
    for size, count in sorted(groups, reverse=True):
        for node, room in enumerate(free):
            if not count:
                break
            placed = min(count, room // size)
            free[node] -= placed * size
            count -= placed
        if count:
            return False
    return True


def _pd_room(replicas: int, per_replica: int) -> str:
    """What fits when PD's replicas do not: PD runs one prefill and one decode replica at the least."""
    if replicas >= 2:
        return f"at most {replicas} replicas in all, or more GPU nodes"
    return f"serving.mode: colocated, one engine for both phases, or GPU nodes for {2 * per_replica} GPUs"


def serving_capacity(cfg: StageConfig, path: str) -> None:
    """Every engine the mode runs (a PD role with its own engine block as it runs) has whole-number parallel sizes,
    its TP GPUs on one node, one replica within the cluster, and all replicas together within its GPUs."""
    parallel_layout(cfg, path)  # the layout within one engine first: its heads, its DCP
    engine_memory(cfg, path)
    scheduler_limits(cfg, path)
    # The Ray cluster has one worker pod per GPU node at the nodegroup's desired size, and no node
    # autoscaler: Ray Serve autoscaling moves replicas within those GPUs, never beyond them.
    desired = cfg.gpu_nodegroup.count
    cluster = f"the Ray cluster has {desired * gpu_spec(cfg).gpus} ({desired} x {cfg.gpu_nodegroup.instance_type})"
    layouts = {role: _replica_layout(cfg, path, role, cluster) for role in cfg.serving.engine_roles()}
    if len(set(layouts.values())) == 1:  # one layout for every replica (always so without per-role engine blocks)
        (par,) = set(layouts.values())
        _replicas_fit(cfg, path, par, cluster)
    else:
        _role_layouts_pack(cfg, path, layouts, cluster)


def _replica_layout(cfg: StageConfig, path: str, role: str | None, cluster: str) -> Parallelism:
    """One engine's parallel sizes: whole numbers, its TP GPUs on one node, one replica within the cluster."""
    serving, spec, desired = cfg.serving, gpu_spec(cfg), cfg.gpu_nodegroup.count
    engine = serving.engine_for(role)
    for name in PARALLEL_FACTORS:
        value = parallel_setting(engine, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            key = name if name in type(engine).model_fields else f"extra_args.{name}"
            raise ConfigError(
                path, serving.engine_field(role, key), f"{short(value)} (allowed: a whole number, 1 or more)"
            )
    tp = engine.tensor_parallel_size
    if tp > spec.gpus:
        raise ConfigError(
            path,
            serving.engine_field(role, "tensor_parallel_size"),
            f"{tp} GPUs per engine, but a {cfg.gpu_nodegroup.instance_type} has {spec.gpus} "
            f"(allowed: 1 to {spec.gpus})",
        )
    par = parallelism(engine)
    units, room = _fits(par, spec.gpus, desired)
    if units > room:
        # One replica alone is too big: name the parallel size that multiplies it past the cluster.
        name = next(n for n in reversed(PARALLEL_FACTORS[1:]) if parallel_setting(engine, n) != 1)
        raise ConfigError(
            path,
            serving.engine_field(role, f"extra_args.{name}"),
            f"one replica needs {par.replica_gpus} GPUs ({par.describe()}), {cluster} (allowed: smaller "
            "parallel sizes, or more GPU nodes)",
        )
    return par


def _replicas_fit(cfg: StageConfig, path: str, par: Parallelism, cluster: str) -> None:
    """Every replica of one layout: the most replicas of both roles within the cluster's units of TP GPUs."""
    serving, per_replica = cfg.serving, par.replica_gpus
    units, room = _fits(par, gpu_spec(cfg).gpus, cfg.gpu_nodegroup.count)
    most = serving.prefill.most + serving.decode.most
    if most * units > room:
        raise ConfigError(
            path,
            _setting_to_change(serving),
            f"prefill + decode need up to {most * per_replica} GPUs ({most} replicas x "
            f"{par.describe()}), {cluster} (allowed: {_pd_room(room // units, per_replica)})",
        )


def _setting_to_change(serving) -> str:
    """The setting most likely to change: the side that asks for more replicas (prefill on a tie), or the GPU node
    count when each side runs one replica and neither has any to give back."""
    if serving.prefill.most == 1 and serving.decode.most == 1:
        return "gpu_nodegroup.count"
    return "serving.decode" if serving.decode.most > serving.prefill.most else "serving.prefill"


def _role_layouts_pack(cfg: StageConfig, path: str, layouts: dict[str | None, Parallelism], cluster: str) -> None:
    """PD roles of different layouts: each replica's units of TP GPUs, packed onto the nodes together. Only PD has
    two layouts (a colocated stage's one engine, role None, has one): every role here is named."""
    serving = cfg.serving
    roles = {role: par for role, par in layouts.items() if role is not None}
    most_of = {role: getattr(serving, role).most for role in roles}
    gpus = {role: most_of[role] * par.replica_gpus for role, par in roles.items()}
    groups = [(par.tensor, most_of[role] * par.replica_gpus // par.tensor) for role, par in roles.items()]
    if not _packs(groups, gpu_spec(cfg).gpus, cfg.gpu_nodegroup.count):
        side = "serving.decode" if gpus["decode"] > gpus["prefill"] else "serving.prefill"
        parts = " + ".join(f"{role} {most_of[role]} x {par.describe()}" for role, par in roles.items())
        raise ConfigError(
            path,
            side,
            f"prefill + decode need up to {sum(gpus.values())} GPUs ({parts}, each engine's TP GPUs on one "
            f"node), {cluster} (allowed: fewer replicas, smaller parallel sizes, or more GPU nodes)",
        )


def idle_gpus(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when prefill and decode at their most replicas leave GPUs idle that the stage pays for."""
    idle, group, serving = idle_gpu_count(cfg), cfg.gpu_nodegroup, cfg.serving
    if idle <= 0:
        return None
    replicas = " + ".join(
        f"{role} {getattr(serving, role).most} x {parallelism(serving.engine_for(role)).describe()}" for role in ROLES
    )
    return (
        "gpu_nodegroup.count",
        (
            f"{idle} of {group.count * gpu_spec(cfg).gpus} GPUs stay idle ({group.count} x {group.instance_type}; "
            f"replicas at most: {replicas}): raise the replica counts or lower gpu_nodegroup.count"
        ),
    )
