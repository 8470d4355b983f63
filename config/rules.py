"""Rules that span fields. Each returns on success and raises ConfigError naming the field on failure."""
from __future__ import annotations

import ipaddress
import re

from . import versions
from .derived import worker_resources
from .engine_args import SM90_GPUS, is_gdn_model
from .errors import ConfigError
from .instance_types import INSTANCE_TYPES, InstanceSpec, known_types
from .schema import StageConfig

# Room the node keeps for the kubelet, the OS and the system daemonsets (VPC CNI, kube-proxy, EKS Pod
# Identity agent, the two device plugins, node monitoring): what a Ray pod may never ask for.
NODE_RESERVED_VCPUS = 1
NODE_RESERVED_MEMORY_GIB = 4


def check(cfg: StageConfig, path: str) -> None:
    for rule in (_zones, _network, _endpoint, _system_nodegroup, _gpu_nodegroup, _serving_image,
                 _serving_transport, _serving_capacity, _serving_resources, _serving_engine, _serving_secret,
                 _benchmark_context):
        rule(cfg, path)


def gpu_spec(cfg: StageConfig) -> InstanceSpec:
    return INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]


def system_spec(cfg: StageConfig) -> InstanceSpec:
    return INSTANCE_TYPES[cfg.system_nodegroup.instance_type]


def _serving_engine(cfg: StageConfig, path: str) -> None:
    """A Gated-DeltaNet model (Qwen3.5) on Hopper GPUs needs the Triton GDN prefill kernel: FlashInfer's
    SM90 kernel is missing in vLLM 0.26 and every request dies (seen on an H200, docs/rehearsal/)."""
    gpu = gpu_spec(cfg).gpu_model
    backend = cfg.serving.engine.gdn_prefill_backend
    if gpu in SM90_GPUS and is_gdn_model(cfg.serving.model.source) and backend in (None, "flashinfer"):
        raise ConfigError(path, "serving.engine.gdn_prefill_backend",
                          f"{backend or 'unset (FlashInfer)'} on {gpu} ({cfg.gpu_nodegroup.instance_type}) with "
                          f"{cfg.serving.model.source}: FlashInfer's SM90 GDN prefill kernel is unavailable in "
                          f"vLLM 0.26 and every request fails (allowed: triton)")


def _zones(cfg: StageConfig, path: str) -> None:
    pattern = re.compile(rf"^{re.escape(cfg.region)}[a-z]$")
    for index, zone in enumerate(cfg.availability_zones):
        if not pattern.match(zone):
            raise ConfigError(path, f"availability_zones[{index}]",
                              f"{zone!r} is not an AZ of region {cfg.region} "
                              f"(allowed: {cfg.region}a, {cfg.region}b, ...)")
    if len(set(cfg.availability_zones)) != len(cfg.availability_zones):
        raise ConfigError(path, "availability_zones", "an AZ is listed twice (each AZ once)")
    if cfg.gpu_availability_zone not in cfg.availability_zones:
        raise ConfigError(path, "gpu_availability_zone",
                          f"{cfg.gpu_availability_zone!r} is not one of the stage's availability_zones "
                          f"(allowed: {', '.join(cfg.availability_zones)})")


def _network(cfg: StageConfig, path: str) -> None:
    if cfg.network.nat_gateways > len(cfg.availability_zones):
        raise ConfigError(path, "network.nat_gateways",
                          f"{cfg.network.nat_gateways} NAT gateways for {len(cfg.availability_zones)} AZs "
                          f"(allowed: 1 to {len(cfg.availability_zones)}, one per AZ at most)")


def _endpoint(cfg: StageConfig, path: str) -> None:
    endpoint = cfg.cluster.endpoint
    if not endpoint.public and not endpoint.private_access:
        raise ConfigError(path, "cluster.endpoint",
                          "neither public_access_cidrs nor private_access: nobody could reach the API "
                          "(allowed: a public CIDR allow-list, private_access: true, or both)")
    open_to_all = any(ipaddress.ip_network(cidr).prefixlen == 0 for cidr in endpoint.public_access_cidrs)
    if not endpoint.private_access and not open_to_all:
        raise ConfigError(path, "cluster.endpoint.private_access",
                          "false, but the kubectl provider runs in the private subnets and reaches a "
                          "CIDR-restricted public endpoint only through the NAT gateway "
                          "(allowed: true)")
    for index, cidr in enumerate(endpoint.public_access_cidrs):
        if ipaddress.ip_network(cidr).prefixlen == 0 and not endpoint.allow_public_internet:
            raise ConfigError(path, f"cluster.endpoint.public_access_cidrs[{index}]",
                              f"{cidr} opens the Kubernetes API to the whole internet "
                              "(allowed: a narrower CIDR, or allow_public_internet: true to accept it)")


def _sizes(path: str, field: str, low: int, desired: int, high: int) -> None:
    if not low <= desired <= high:
        raise ConfigError(path, field, f"min {low}, desired {desired}, max {high} "
                                       "(allowed: min <= desired <= max)")


def _known_type(path: str, field: str, instance_type: str, *, gpu: bool) -> None:
    if instance_type not in known_types(gpu=gpu):
        raise ConfigError(path, f"{field}.instance_type",
                          f"{instance_type!r} is not a known {'GPU' if gpu else 'CPU'} instance type "
                          f"(allowed: {', '.join(known_types(gpu=gpu))})")


def _system_nodegroup(cfg: StageConfig, path: str) -> None:
    group = cfg.system_nodegroup
    _known_type(path, "system_nodegroup", group.instance_type, gpu=False)
    _sizes(path, "system_nodegroup", group.min_size, group.desired_size, group.max_size)


def _gpu_nodegroup(cfg: StageConfig, path: str) -> None:
    group = cfg.gpu_nodegroup
    _known_type(path, "gpu_nodegroup", group.instance_type, gpu=True)
    low, desired, high = group.sizes
    _sizes(path, "gpu_nodegroup", low, desired, high)
    spec = gpu_spec(cfg)
    if group.efa and not spec.has_efa:
        efa_types = [name for name in known_types(gpu=True) if INSTANCE_TYPES[name].has_efa]
        raise ConfigError(path, "gpu_nodegroup.efa",
                          f"{group.instance_type} has no EFA interface "
                          f"(allowed: efa: false, or an EFA type: {', '.join(efa_types)})")


def _serving_image(cfg: StageConfig, path: str) -> None:
    serving = cfg.serving
    tag = cfg.image.rsplit(":", 1)[-1] if ":" in cfg.image.rsplit("/", 1)[-1] else ""
    image_ray = versions.DLC_RAY_VERSIONS.get(tag)
    if image_ray is not None and image_ray != serving.ray_version:
        raise ConfigError(path, "serving.ray_version",
                          f"{serving.ray_version} differs from the image's Ray {image_ray} "
                          f"(allowed: {image_ray} for tag {tag})")


def _serving_transport(cfg: StageConfig, path: str) -> None:
    if cfg.gpu_nodegroup.efa and cfg.serving.kv_backend != "LIBFABRIC":
        raise ConfigError(path, "serving.kv_backend",
                          f"{cfg.serving.kv_backend} on EFA runs at TCP speed: NIXL's UCX backend does not "
                          "use EFA (allowed: LIBFABRIC when gpu_nodegroup.efa is true)")


def _serving_capacity(cfg: StageConfig, path: str) -> None:
    serving, spec = cfg.serving, gpu_spec(cfg)
    tp = serving.engine.tensor_parallel_size
    if tp > spec.gpus:
        raise ConfigError(path, "serving.engine.tensor_parallel_size",
                          f"{tp} GPUs per engine, but a {cfg.gpu_nodegroup.instance_type} has {spec.gpus} "
                          f"(allowed: 1 to {spec.gpus})")
    # The Ray cluster has one worker pod per GPU node at the nodegroup's desired size, and no node
    # autoscaler: Ray Serve autoscaling moves replicas within those GPUs, never beyond them.
    desired = cfg.gpu_nodegroup.count
    replicas_per_node = spec.gpus // tp
    most = serving.prefill.most + serving.decode.most
    if most > replicas_per_node * desired:
        raise ConfigError(path, "serving.prefill",
                          f"prefill + decode need up to {most * tp} GPUs ({most} replicas x TP {tp}), the Ray "
                          f"cluster has {desired * spec.gpus} ({desired} x {cfg.gpu_nodegroup.instance_type}) "
                          f"(allowed: at most {replicas_per_node * desired} replicas in all, or more GPU nodes)")


def _serving_resources(cfg: StageConfig, path: str) -> None:
    gpu = gpu_spec(cfg)
    res = worker_resources(cfg)
    cpu_room, mem_room = gpu.vcpus - NODE_RESERVED_VCPUS, gpu.memory_gib - NODE_RESERVED_MEMORY_GIB
    if res.cpu_request > res.cpu_limit:
        raise ConfigError(path, "serving.worker_resources.cpu_request",
                          f"{res.cpu_request} > cpu_limit {res.cpu_limit} (allowed: request <= limit)")
    if res.memory_request_gib > res.memory_limit_gib:
        raise ConfigError(path, "serving.worker_resources.memory_request_gib",
                          f"{res.memory_request_gib} > memory_limit_gib {res.memory_limit_gib} "
                          "(allowed: request <= limit)")
    if res.cpu_limit > cpu_room:
        raise ConfigError(path, "serving.worker_resources.cpu_limit",
                          f"{res.cpu_limit} vCPUs leave no room for the system daemonsets on a "
                          f"{cfg.gpu_nodegroup.instance_type} (allowed: 1 to {cpu_room})")
    if res.memory_limit_gib + res.shm_gib > mem_room:
        raise ConfigError(path, "serving.worker_resources.memory_limit_gib",
                          f"{res.memory_limit_gib} GiB + {res.shm_gib} GiB /dev/shm leave no room on a "
                          f"{cfg.gpu_nodegroup.instance_type} (allowed: limit + shm <= {mem_room} GiB)")
    head, system = cfg.serving.head_resources, system_spec(cfg)
    if head.cpu_request > head.cpu_limit or head.memory_request_gib > head.memory_limit_gib:
        raise ConfigError(path, "serving.head_resources", "a request exceeds its limit (allowed: request <= limit)")
    if head.cpu_limit > system.vcpus - NODE_RESERVED_VCPUS or \
            head.memory_limit_gib > system.memory_gib - NODE_RESERVED_MEMORY_GIB:
        raise ConfigError(path, "serving.head_resources",
                          f"limits {head.cpu_limit} vCPU / {head.memory_limit_gib} GiB do not fit a "
                          f"{cfg.system_nodegroup.instance_type} (allowed: up to "
                          f"{system.vcpus - NODE_RESERVED_VCPUS} vCPU / "
                          f"{system.memory_gib - NODE_RESERVED_MEMORY_GIB} GiB)")


def _serving_secret(cfg: StageConfig, path: str) -> None:
    ref = cfg.serving.hf_token_secret
    if ref and ref.startswith("arn:"):
        parts = ref.split(":")
        region, account = parts[3], parts[4]
        if region != cfg.region:
            raise ConfigError(path, "serving.hf_token_secret",
                              f"the secret is in {region}, the stage in {cfg.region} "
                              f"(allowed: a secret in {cfg.region})")
        if cfg.account and account != cfg.account:
            raise ConfigError(path, "serving.hf_token_secret",
                              f"the secret is in account {account}, the stage in {cfg.account} "
                              f"(allowed: a secret in {cfg.account})")


def _benchmark_context(cfg: StageConfig, path: str) -> None:
    context = cfg.serving.engine.max_model_len
    for index, profile in enumerate(cfg.benchmark.profiles):
        needed = profile.input_tokens + profile.output_tokens
        if needed > context:
            raise ConfigError(path, f"benchmark.profiles[{index}].input_tokens",
                              f"{profile.input_tokens} in + {profile.output_tokens} out = {needed} tokens, more than "
                              f"the served context serving.engine.max_model_len {context} (the server would "
                              f"reject every request; allowed: at most {context} together)")
