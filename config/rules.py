"""Rules that span fields. Each returns on success and raises ConfigError naming the field on failure."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Sequence
from typing import Any

from . import first_start, names, rules_safety, rules_workload, versions
from .derived import (
    PUBLIC_ENDPOINT_LIMIT,
    SUBNET_LAYOUT,
    is_unreachable,
    model_memory_floor,
    public_addresses,
    smallest_vpc_prefix,
    subnet_plan,
    worker_resources,
)
from .derived import RUNTIME_RESERVE_GIB as RUNTIME_RESERVE
from .engine_args import SM90_GPUS, is_gdn_model
from .errors import ConfigError, dotted, short, warning_line
from .instance_types import INSTANCE_TYPES, InstanceSpec, known_types
from .schema import MAX_EXTRA_ARGS, ROLES, StageConfig

# Room the node keeps for the kubelet, the OS and the system daemonsets (VPC CNI, kube-proxy, EKS Pod
# Identity agent, the two device plugins, node monitoring): what a Ray pod may never ask for.
NODE_RESERVED_VCPUS = 1
NODE_RESERVED_MEMORY_GIB = 4


def check(cfg: StageConfig, path: str) -> None:
    for rule in (
        _zones,
        _names,
        _network,
        _endpoint,
        rules_workload.admin_principals,
        _admins,
        _system_nodegroup,
        _gpu_nodegroup,
        _serving_image,
        _serving_transport,
        _serving_roles,
        rules_workload.model_source,
        rules_workload.model_access,
        rules_workload.serving_capacity,
        _serving_model_fits,
        _serving_resources,
        _serving_engine,
        _serving_secret,
        rules_workload.serving_namespace,
        _serving_namespaces,
        rules_workload.weight_cache,
        _benchmark_context,
        _observability,
        rules_safety.check,
        _gpu_root_volume,
    ):
        rule(cfg, path)


def warnings(cfg: StageConfig, path: str) -> list[str]:
    """The warning lines of a valid stage (errors.warning_line): what is allowed but most likely a mistake."""
    found = [rule(cfg) for rule in (rules_workload.model_id_mismatch,)]
    return [warning_line(path, field, problem) for field, problem in filter(None, found)]


def placeholder_warnings(cfg: StageConfig, path: str) -> list[str]:
    """The warning lines `validate` prints for what the example stages ship as placeholders (nobody can use the
    cluster, an endpoint range nobody comes from): fine to synthesize, not to deploy as they are. Not printed on
    every load: every command reads the example stages."""
    found = [rule(cfg) for rule in (rules_workload.no_admin_principal, rules_workload.placeholder_endpoint_cidrs)]
    return [warning_line(path, field, problem) for field, problem in filter(None, found)]


def gpu_spec(cfg: StageConfig) -> InstanceSpec:
    return INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]


def system_spec(cfg: StageConfig) -> InstanceSpec:
    return INSTANCE_TYPES[cfg.system_nodegroup.instance_type]


def _serving_roles(cfg: StageConfig, path: str) -> None:
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


def _serving_engine(cfg: StageConfig, path: str) -> None:
    """A Gated-DeltaNet model (Qwen3.5) on Hopper GPUs needs the Triton GDN prefill kernel: FlashInfer's
    SM90 kernel is missing in vLLM 0.26 and every request dies (seen on an H200: docs/REHEARSAL.md, the gdn_prefill_backend override).
    Checked for every engine the mode runs (a PD role with its own engine block as it runs)."""
    gpu = gpu_spec(cfg).gpu_model
    serving = cfg.serving
    for role in serving.engine_roles():
        backend = serving.engine_for(role).gdn_prefill_backend
        if gpu in SM90_GPUS and is_gdn_model(serving.model.source) and backend in (None, "flashinfer"):
            raise ConfigError(
                path,
                serving.engine_field(role, "gdn_prefill_backend"),
                f"{backend or 'unset (FlashInfer)'} on {gpu} ({cfg.gpu_nodegroup.instance_type}) with "
                f"{serving.model.source}: FlashInfer's SM90 GDN prefill kernel is unavailable in "
                f"vLLM 0.26 and every request fails (allowed: triton)",
            )


def _zones(cfg: StageConfig, path: str) -> None:
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


def _names(cfg: StageConfig, path: str) -> None:
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


def _network(cfg: StageConfig, path: str) -> None:
    zones = len(cfg.availability_zones)
    if cfg.network.nat_gateways > zones:
        raise ConfigError(
            path,
            "network.nat_gateways",
            f"{cfg.network.nat_gateways} NAT gateways for {zones} AZs (allowed: 1 to {zones}, one per AZ at most)",
        )
    if subnet_plan(cfg.network.vpc_cidr, zones) is None:
        layout = ", ".join(f"a /{prefix} {group}" for group, prefix in SUBNET_LAYOUT)
        smallest = smallest_vpc_prefix(zones)
        raise ConfigError(
            path,
            "network.vpc_cidr",
            f"{cfg.network.vpc_cidr} is too small for the subnets of {zones} AZs ({layout} subnet "
            f"per AZ, each aligned to its size) (allowed: a /{smallest} or larger for {zones} AZs)",
        )


def _endpoint_cidr(path: str, field: str, cidr: str) -> None:
    """One public_access_cidrs entry: a masked, IPv4, publicly reachable CIDR block."""
    if "/" not in cidr:  # the schema let ipaddress read it (a bare address is a /32); the template would not
        raise ConfigError(
            path,
            field,
            f"{cidr} has no prefix length: EKS's publicAccessCidrs are CIDR blocks "
            f"(allowed: {cidr}/{32 if ':' not in cidr else 128} for this one address, or its range)",
        )
    if ipaddress.ip_network(cidr).version == 6:
        raise ConfigError(
            path,
            field,
            f"{cidr} is IPv6: EKS takes no IPv6 CIDR in publicAccessCidrs of an IPv4 cluster (allowed: IPv4 CIDRs)",
        )
    if is_unreachable(cidr):
        raise ConfigError(
            path,
            field,
            f"{cidr} is a private or reserved range, never the source of a request to the public "
            "endpoint (allowed: public IPv4 ranges; clients inside the VPC use "
            "private_access: true)",
        )


def _endpoint(cfg: StageConfig, path: str) -> None:
    """Who reaches the public endpoint: IPv4 only (EKS takes no IPv6 CIDR on an IPv4 cluster, which this
    app builds), public ranges only (a private range never reaches a public endpoint: in-VPC clients use
    private_access), and, without allow_public_internet, at most a /8's worth of public addresses in the
    union of the list (so 0.0.0.0/0 split into pieces is judged like 0.0.0.0/0)."""
    endpoint = cfg.cluster.endpoint
    field = "cluster.endpoint.public_access_cidrs"
    if not endpoint.public and not endpoint.private_access:
        raise ConfigError(
            path,
            "cluster.endpoint",
            "neither public_access_cidrs nor private_access: nobody could reach the API "
            "(allowed: a public CIDR allow-list, private_access: true, or both)",
        )
    for index, cidr in enumerate(endpoint.public_access_cidrs):
        _endpoint_cidr(path, f"{field}[{index}]", cidr)
    # IPv4 only by now (an IPv6 CIDR is refused above): collapse_addresses takes one version.
    union = list(ipaddress.collapse_addresses(ipaddress.IPv4Network(c) for c in endpoint.public_access_cidrs))
    open_to_all = union == [ipaddress.IPv4Network("0.0.0.0/0")]
    if not endpoint.private_access and not open_to_all:
        raise ConfigError(
            path,
            "cluster.endpoint.private_access",
            "false, but the kubectl provider runs in the private subnets and reaches a "
            "CIDR-restricted public endpoint only through the NAT gateway "
            "(allowed: true)",
        )
    covered = public_addresses(endpoint.public_access_cidrs)
    if covered > PUBLIC_ENDPOINT_LIMIT and not endpoint.allow_public_internet:
        cidrs = endpoint.public_access_cidrs
        whole = [i for i, c in enumerate(cidrs) if ipaddress.ip_network(c).prefixlen == 0]
        alone = [i for i, c in enumerate(cidrs) if public_addresses([c]) > PUBLIC_ENDPOINT_LIMIT]
        # One range too wide on its own is named by its index; pieces too wide together, by the list.
        if open_to_all:
            where, problem = (
                (f"{field}[{whole[0]}]", f"{cidrs[whole[0]]} opens")
                if whole
                else (field, f"{', '.join(cidrs)} together open")
            )
            problem += " the Kubernetes API to the whole internet"
        else:
            where, what = (
                (f"{field}[{alone[0]}]", f"{cidrs[alone[0]]} covers") if alone else (field, "the ranges together cover")
            )
            problem = (
                f"{what} {covered:,} public addresses ({covered / 2**32:.1%} of IPv4), more than a /8's "
                f"worth ({PUBLIC_ENDPOINT_LIMIT:,})"
            )
        raise ConfigError(
            path,
            where,
            f"{problem} (allowed: narrower CIDRs, at most a /8's worth of public "
            "addresses in all, or allow_public_internet: true to accept it)",
        )


def _admins(cfg: StageConfig, path: str) -> None:
    """Who can use kubectl on the cluster: only the principals of cluster.admin_principal_arns get a
    cluster-admin access entry from this app, and no person does by default (aws_eks_v2's creator entry
    goes to CloudFormation's execution role). An empty list therefore needs allow_no_admin_principals:
    true, saying that access entries are managed elsewhere; a list together with it is a contradiction."""
    cluster = cfg.cluster
    count = len(cluster.admin_principal_arns)
    if not count and not cluster.allow_no_admin_principals:
        raise ConfigError(
            path,
            "cluster.admin_principal_arns",
            "empty: no IAM principal gets a cluster-admin access entry, so nobody can use kubectl "
            "on the cluster (allowed: your admin IAM role's ARN, e.g. "
            "arn:aws:iam::<account>:role/<name>; or cluster.allow_no_admin_principals: true when "
            "the access entries are managed outside this app)",
        )
    if count and cluster.allow_no_admin_principals:
        raise ConfigError(
            path,
            "cluster.allow_no_admin_principals",
            f"true, but cluster.admin_principal_arns lists {count} principal(s) that get cluster "
            "admin: the two contradict each other (allowed: false or unset when the list names "
            "admins; true only with an empty list)",
        )


def _sizes(path: str, field: str, low: int, desired: int, high: int) -> None:
    if not low <= desired <= high:
        raise ConfigError(path, field, f"min {low}, desired {desired}, max {high} (allowed: min <= desired <= max)")


def _known_type(path: str, field: str, instance_type: str, *, gpu: bool) -> None:
    if instance_type not in known_types(gpu=gpu):
        raise ConfigError(
            path,
            f"{field}.instance_type",
            f"{instance_type!r} is not a known {'GPU' if gpu else 'CPU'} instance type "
            f"(allowed: {', '.join(known_types(gpu=gpu))})",
        )


def _system_nodegroup(cfg: StageConfig, path: str) -> None:
    group = cfg.system_nodegroup
    _known_type(path, "system_nodegroup", group.instance_type, gpu=False)
    _sizes(path, "system_nodegroup", group.min_size, group.desired_size, group.max_size)
    _root_volume(path, "system_nodegroup", group.root_volume_gib, first_start.system_root_volume_floor_gib(), "")


def _gpu_root_volume(cfg: StageConfig, path: str) -> None:
    """Last: a model too large for its GPUs, or an engine setting it cannot run, is the first thing to fix."""
    floor = first_start.gpu_root_volume_floor_gib(cfg)
    _root_volume(path, "gpu_nodegroup", cfg.gpu_nodegroup.root_volume_gib, floor, " and the model's weights")


def _root_volume(path: str, field: str, given: int, floor: int, also: str) -> None:
    """Two serving images side by side within kubelet's image-GC threshold (config/first_start.py)."""
    if given < floor:
        raise ConfigError(
            path,
            f"{field}.root_volume_gib",
            f"{given} GiB cannot hold two serving images{also} below kubelet's 85 % image-GC threshold "
            f'(allowed: {floor} or more; docs/DECISIONS.md, "Root volumes and the first start")',
        )


def _gpu_nodegroup(cfg: StageConfig, path: str) -> None:
    group = cfg.gpu_nodegroup
    _known_type(path, "gpu_nodegroup", group.instance_type, gpu=True)
    low, desired, high = group.sizes
    _sizes(path, "gpu_nodegroup", low, desired, high)
    spec = gpu_spec(cfg)
    if group.efa and not spec.has_efa:
        efa_types = [name for name in known_types(gpu=True) if INSTANCE_TYPES[name].has_efa]
        raise ConfigError(
            path,
            "gpu_nodegroup.efa",
            f"{group.instance_type} has no EFA interface (allowed: efa: false, or an EFA type: {', '.join(efa_types)})",
        )


# An image reference as the OCI distribution grammar defines it (distribution/reference regexp.go: a domain with
# an optional port, lower-case path components joined by '.', '_', '__' or dashes, a tag of up to 128 word
# characters and '.', '-', a digest algorithm:hex), here with a tag or a digest required: an untagged
# reference pulls `latest`, which moves.
_DOMAIN_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    rf"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}(?:@{_DIGEST})?|@{_DIGEST})"
)


def _serving_image(cfg: StageConfig, path: str) -> None:
    serving = cfg.serving
    if serving.image is None and not versions.DLC_REGISTRIES.get(cfg.region):
        raise ConfigError(
            path,
            "region",
            f"{cfg.region} has no registry of the Ray Serve LLM Deep Learning Container (config/dlc_registries.json) "
            f"(allowed: a region listed there, or serving.image naming an image you host)",
        )
    if serving.image is not None and not IMAGE_REFERENCE.fullmatch(serving.image):
        raise ConfigError(
            path,
            "serving.image",
            f"{short(serving.image, 80)} is not an image reference with a tag or digest (allowed: "
            "[registry[:port]/]lower-case/path:tag or ...@sha256:<hex>, e.g. 123456789012.dkr.ecr.us-west-2."
            "amazonaws.com/ray:serve-llm-cuda-v1.0.0)",
        )
    _serving_model_id(cfg, path)
    tag = cfg.image.rsplit(":", 1)[-1] if ":" in cfg.image.rsplit("/", 1)[-1] else ""
    image_ray = versions.DLC_RAY_VERSIONS.get(tag)
    if image_ray is not None and image_ray != serving.ray_version:
        raise ConfigError(
            path,
            "serving.ray_version",
            f"{serving.ray_version} differs from the image's Ray {image_ray} (allowed: {image_ray} for tag {tag})",
        )


def _serving_model_id(cfg: StageConfig, path: str) -> None:
    """Ray Serve LLM reads `base:adapter` in a model id (ray.llm._internal.serve lora utils, get_base_model_id:
    model_id.split(":")[0]), so an id with ':' would route to a LoRA adapter that does not exist."""
    model_id = cfg.serving.model.id
    if ":" in model_id:
        raise ConfigError(
            path,
            "serving.model.id",
            f"{short(model_id, 80)} has a ':', which Ray Serve LLM reads as base-model:LoRA-adapter (allowed: "
            "letters, digits, '.', '_' and '-')",
        )


def _serving_transport(cfg: StageConfig, path: str) -> None:
    if cfg.gpu_nodegroup.efa and cfg.serving.kv_backend != "LIBFABRIC":
        raise ConfigError(
            path,
            "serving.kv_backend",
            f"{cfg.serving.kv_backend} on EFA runs at TCP speed: NIXL's UCX backend does not "
            "use EFA (allowed: LIBFABRIC when gpu_nodegroup.efa is true)",
        )


def _serving_model_fits(cfg: StageConfig, path: str) -> None:
    """The model's weights, one max_model_len sequence of KV cache (when the architecture is known) and a
    1 GiB runtime reserve must fit one engine's GPUs at gpu_memory_utilization (config/derived.py:
    model_memory_floor). A model of unknown size (not in KNOWN_MODELS, no size in its name, no
    serving.model.parameters_billion) is not checked. Checked for every engine the mode runs (a PD role with its
    own engine block as it runs)."""
    for role in cfg.serving.engine_roles():
        _model_fits(cfg, path, role)


def _model_fits(cfg: StageConfig, path: str, role: str | None) -> None:
    engine, gpu = cfg.serving.engine_for(role), gpu_spec(cfg)
    floor = model_memory_floor(cfg, engine)
    if floor is None or floor.gpu_gib <= 0 or floor.needed_gib <= floor.available_gib:
        return  # unknown size, or an instance type without a recorded GPU memory
    # "one engine" unless the role runs other settings than serving.engine: then which role's engine
    which = f"one {role} engine" if engine != cfg.serving.engine else "one engine"
    have = (
        f"{which} has {floor.available_gib:.1f} GiB ({floor.gpus} x {gpu.gpu_model} {floor.gpu_gib:g} GiB x "
        f"gpu_memory_utilization {engine.gpu_memory_utilization:g})"
    )
    weights = (
        f"{floor.parameters / 1e9:.2f}e9 parameters ({floor.basis}) x {floor.bytes_per_parameter:g} bytes = "
        f"{floor.weights_gib:.1f} GiB of weights"
    )
    fixed = floor.weights_gib + RUNTIME_RESERVE
    if floor.kv_gib and fixed <= floor.available_gib:
        # the weights fit: it is the context that does not
        tokens = int((floor.available_gib - fixed) / floor.kv_gib * engine.max_model_len)
        raise ConfigError(
            path,
            cfg.serving.engine_field(role, "max_model_len"),
            f"{engine.max_model_len} tokens of KV cache ({floor.kv_gib:.1f} GiB for one sequence) + "
            f"{weights} + {RUNTIME_RESERVE:g} GiB reserve = {floor.needed_gib:.1f} GiB, but {have} "
            f"(allowed: max_model_len up to about {max(tokens, 0)}, or more GPUs per engine)",
        )
    kv = f" + {floor.kv_gib:.1f} GiB KV cache for one {engine.max_model_len}-token sequence" if floor.kv_gib else ""
    gpus_needed = math.ceil(floor.needed_gib / (floor.gpu_gib * engine.gpu_memory_utilization))
    hint = (
        f"at least {gpus_needed} GPUs per engine (tensor_parallel_size) on a GPU type with that many per node"
        if gpus_needed > gpu.gpus
        else f"tensor_parallel_size {gpus_needed} or more"
    )
    raise ConfigError(
        path,
        "serving.model.source",
        f"{cfg.serving.model.source} needs at least {floor.needed_gib:.1f} GiB per engine ({weights}"
        f"{kv} + {RUNTIME_RESERVE:g} GiB reserve), but {have} (allowed: a smaller or quantized model, "
        f"or {hint}; set serving.model.parameters_billion if the size is wrong)",
    )


def _serving_resources(cfg: StageConfig, path: str) -> None:
    gpu = gpu_spec(cfg)
    res = worker_resources(cfg)
    cpu_room, mem_room = gpu.vcpus - NODE_RESERVED_VCPUS, gpu.memory_gib - NODE_RESERVED_MEMORY_GIB
    if res.cpu_request > res.cpu_limit:
        raise ConfigError(
            path,
            "serving.worker_resources.cpu_request",
            f"{res.cpu_request} > cpu_limit {res.cpu_limit} (allowed: request <= limit)",
        )
    if res.memory_request_gib > res.memory_limit_gib:
        raise ConfigError(
            path,
            "serving.worker_resources.memory_request_gib",
            f"{res.memory_request_gib} > memory_limit_gib {res.memory_limit_gib} (allowed: request <= limit)",
        )
    if res.cpu_limit > cpu_room:
        raise ConfigError(
            path,
            "serving.worker_resources.cpu_limit",
            f"{res.cpu_limit} vCPUs leave no room for the system daemonsets on a "
            f"{cfg.gpu_nodegroup.instance_type} (allowed: 1 to {cpu_room})",
        )
    if res.memory_limit_gib + res.shm_gib > mem_room:
        raise ConfigError(
            path,
            "serving.worker_resources.memory_limit_gib",
            f"{res.memory_limit_gib} GiB + {res.shm_gib} GiB /dev/shm leave no room on a "
            f"{cfg.gpu_nodegroup.instance_type} (allowed: limit + shm <= {mem_room} GiB)",
        )
    head, system = cfg.serving.head_resources, system_spec(cfg)
    if head.cpu_request > head.cpu_limit or head.memory_request_gib > head.memory_limit_gib:
        raise ConfigError(path, "serving.head_resources", "a request exceeds its limit (allowed: request <= limit)")
    if (
        head.cpu_limit > system.vcpus - NODE_RESERVED_VCPUS
        or head.memory_limit_gib > system.memory_gib - NODE_RESERVED_MEMORY_GIB
    ):
        raise ConfigError(
            path,
            "serving.head_resources",
            f"limits {head.cpu_limit} vCPU / {head.memory_limit_gib} GiB do not fit a "
            f"{cfg.system_nodegroup.instance_type} (allowed: up to "
            f"{system.vcpus - NODE_RESERVED_VCPUS} vCPU / "
            f"{system.memory_gib - NODE_RESERVED_MEMORY_GIB} GiB)",
        )


def _serving_secret(cfg: StageConfig, path: str) -> None:
    ref = cfg.serving.hf_token_secret
    if ref and ref.startswith("arn:"):
        _same_region_and_account(
            cfg,
            path,
            "serving.hf_token_secret",
            ref,
            what="secret",
            allowed_region=f"a secret in {cfg.region}",
            allowed_account=f"a secret in {cfg.account}",
        )


def _same_region_and_account(
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


def _serving_namespaces(cfg: StageConfig, path: str) -> None:
    """Client namespaces get port 8000 of the Ray pods. The serving namespace itself is refused (its only
    pods are the Ray pods, which already reach each other: listing it reads as if it did something). Any
    other namespace, kube-system included, is allowed: some clusters run their ingress or gateway proxy
    there, and the rule opens only Serve's port."""
    serving = cfg.serving
    for index, name in enumerate(serving.client_namespaces):
        if name == serving.namespace:
            raise ConfigError(
                path,
                f"serving.client_namespaces[{index}]",
                f"{name} is the serving namespace itself: its Ray pods already reach each other "
                "(allowed: the namespaces of the clients, e.g. gateway)",
            )
        if name in serving.client_namespaces[:index]:
            raise ConfigError(path, f"serving.client_namespaces[{index}]", f"{name} is listed twice (each once)")


def _benchmark_context(cfg: StageConfig, path: str) -> None:
    """Prompt and answer of every profile fit the served context: the smallest max_model_len of the engines the
    mode runs (a PD request is prefilled by one engine and decoded by the other: both hold all of it)."""
    serving = cfg.serving
    lengths = [(serving.engine_for(role).max_model_len, role) for role in serving.engine_roles()]
    context = min(length for length, _ in lengths)
    role = next(role for length, role in lengths if length == context)  # prefill on a tie
    field = serving.engine_field(role, "max_model_len")
    for index, profile in enumerate(cfg.benchmark.profiles):
        needed = profile.input_tokens + profile.output_tokens
        if needed > context:
            raise ConfigError(
                path,
                f"benchmark.profiles[{index}].input_tokens",
                f"{profile.input_tokens} in + {profile.output_tokens} out = {needed} tokens, more than "
                f"the served context {field} {context} (the server would "
                f"reject every request; allowed: at most {context} together)",
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


# --- Secret values where a name belongs ------------------------------------------------------------------
# The secret shapes refused in stage files (every key and string value of the parsed file, before the
# model sees it: the refusal names the field and the kind, never the value); config/secret_scan.py scans
# every synth output for the same shapes. They live in config/secret_shapes.py (errors.py cuts them out of
# every message too) and are re-exported here.
from .secret_shapes import AWS_SECRET_RUN, KEY_CONTEXT, SECRET_SHAPES, secret_kind, secret_like_key  # noqa: F401

# No string of a stage file is longer than 2,048 characters (the longest field's max_length); one over 64 KiB
# is refused before it is scanned, so the scan's work is bounded by the file (256 KiB) whatever it holds.
MAX_STRING_CHARS = 64 * 1024


def refuse_secrets(data: Any, path: str) -> None:
    """Walk the parsed file (bounded: the loader caps its size and its expanded node count) and refuse the first
    string, key or value, that looks like a secret. Iterative: no recursion limit to reach. Each distinct string
    is scanned once (YAML aliases hand the walker one string object many times; the result depends only on the
    text and on whether its key is key-like), and the scan is linear in the string (config/secret_shapes.py)."""
    seen: dict[tuple[str, bool], str | None] = {}

    def kind_of(text: str, key: str, where: tuple) -> str | None:
        if len(text) > MAX_STRING_CHARS:
            raise ConfigError(
                path,
                dotted(where),
                f"a string of {len(text)} characters (allowed: up to "
                f"{MAX_STRING_CHARS}; no setting of a stage file is that long)",
            )
        memo = (text, secret_like_key(key))  # the key class by its words (config/secret_shapes.py)
        if memo not in seen:
            seen[memo] = secret_kind(text, "secret" if memo[1] else "")
        return seen[memo]

    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key in value:
                kind = kind_of(key, "", where) if isinstance(key, str) else None
                if kind:
                    raise ConfigError(
                        path,
                        dotted(where),
                        f"a key looks like {kind}: a secret value does not "
                        "belong in a stage file (not shown; allowed: keep it in AWS Secrets Manager, "
                        "and revoke it if this file was shared)",
                    )
            stack.extend((where + (key,), item) for key, item in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((where + (index,), item) for index, item in reversed(list(enumerate(value))))
        elif isinstance(value, str):
            key = str(where[-1]) if where and not isinstance(where[-1], int) else ""
            kind = kind_of(value, key, where)
            if kind:
                name = dotted(where)
                allowed = (
                    "the name or ARN of the Secrets Manager secret that holds the token"
                    if name == "serving.hf_token_secret"
                    else "keep secrets in AWS Secrets Manager; serving.hf_token_secret names the token's secret"
                )
                raise ConfigError(
                    path,
                    name,
                    f"looks like {kind}, a secret value where none belongs (the value is "
                    f"not shown; allowed: {allowed}; revoke it if this file was shared)",
                )


def _observability(cfg: StageConfig, path: str) -> None:
    """CloudWatch alarm actions reach an SNS topic of the alarm's own region (and, with an account in the
    stage file, its own account: a topic elsewhere needs a policy this app does not manage)."""
    arn = cfg.observability.alarm_topic_arn
    if not arn:
        return
    _same_region_and_account(
        cfg,
        path,
        "observability.alarm_topic_arn",
        arn,
        what="topic",
        region_reason=": CloudWatch alarms notify only topics of their own region",
        allowed_region=f"an SNS topic ARN in {cfg.region}",
        allowed_account=f"a topic of account {cfg.account}",
    )
