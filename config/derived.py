"""Values computed from a valid stage config, used by both the rules and the stacks and charts."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from .engine_args import model_key
from .instance_types import InstanceSpec, instance_spec
from .schema import ROLES, Engine, StageConfig


@dataclass(frozen=True)
class PodResources:
    cpu_request: int
    cpu_limit: int
    memory_request_gib: int
    memory_limit_gib: int
    shm_gib: int
    gpus: int
    efa_interfaces: int


def worker_resources(cfg: StageConfig) -> PodResources:
    """One Ray worker pod per GPU node, holding all the node's GPUs and EFA interfaces.

    Unless the stage says otherwise: limits are half the node and requests a quarter, which leaves the
    other half to the system daemonsets and to the page cache that keeps the weights warm (on a
    g6.8xlarge, 32 vCPU / 128 GiB: cpu 8/16, memory 32Gi/64Gi, the reference deployment's values).
    """
    spec, given = gpu_spec(cfg), cfg.serving.worker_resources
    return PodResources(
        cpu_request=given.cpu_request or max(1, spec.vcpus // 4),
        cpu_limit=given.cpu_limit or max(1, spec.vcpus // 2),
        memory_request_gib=given.memory_request_gib or max(1, spec.memory_gib // 4),
        memory_limit_gib=given.memory_limit_gib or max(1, spec.memory_gib // 2),
        shm_gib=given.shm_gib,
        gpus=spec.gpus,
        efa_interfaces=spec.efa_interfaces if cfg.gpu_nodegroup.efa else 0,
    )


# --- EFA's pinned buffers -----------------------------------------------------------------------------
# What libfabric's efa provider pins for its bounce buffers per EFA interface, on ordinary pages within the Ray
# worker's memory limit (the pod sets FI_EFA_USE_HUGE_PAGE=0: docs/DECISIONS.md, "What EFA needs in the pod"):
# about 110 MB per endpoint (the EFA installer's figure, from which bottlerocket-os/bottlerocket-core-kit#141
# sizes EFA's huge pages), and NIXL opens a few endpoints (rails) per interface. An allowance, not measured.
EFA_PINNED_GIB_PER_INTERFACE = 1


def efa_pinned_gib(cfg: StageConfig) -> int:
    """The Ray worker's memory that EFA's buffers take (0 without EFA)."""
    return worker_resources(cfg).efa_interfaces * EFA_PINNED_GIB_PER_INTERFACE


# --- The KV transfer's floor ---------------------------------------------------------------------------
# The share of one EFA interface's bandwidth a KV transfer must reach by default (docs/DECISIONS.md, "The
# fabric gate's floor"): a transfer is one request's KV cache over one interface, without GPUDirect RDMA on an
# L4, so through host memory; NIXL over libfabric's tcp provider or UCX on TCP runs well under it.
KV_FLOOR_FRACTION = 0.25


def kv_transfer_floor_gbps(cfg: StageConfig) -> float | None:
    """The stage's floor for one KV transfer, in Gbps: serving.kv_transfer_floor_gbps when set, else
    KV_FLOOR_FRACTION of one EFA interface of the GPU type; None in colocated mode (nothing moves) or
    without EFA and no floor stated (config/rules/serving.py kv_transfer_floor refuses that stage)."""
    if cfg.serving.mode != "pd":
        return None
    if cfg.serving.kv_transfer_floor_gbps is not None:
        return cfg.serving.kv_transfer_floor_gbps
    if not cfg.gpu_nodegroup.efa:
        return None
    return KV_FLOOR_FRACTION * gpu_spec(cfg).efa_interface_gbps


def long_prompt_tokens(cfg: StageConfig) -> int:
    """The stage's long-prompt benchmark size: the profile named long-prompt, else the longest prompt."""
    profiles = cfg.benchmark.profiles
    named = [p for p in profiles if p.name == "long-prompt"]
    return (named[0] if named else max(profiles, key=lambda p: p.input_tokens)).input_tokens


# --- The VPC's subnet layout -------------------------------------------------------------------------
# What stacks/network.py builds, per subnet group and AZ: (group name, prefix length). The network stack
# allocates them in this order, each group once per AZ (tests/config/test_safety.py checks the
# synthesized template against this table and against subnet_plan()).
SUBNET_LAYOUT: tuple[tuple[str, int], ...] = (("public", 24), ("private", 19), ("control-plane", 28))


def subnet_plan(vpc_cidr: str, zones: int) -> list[tuple[str, str]] | None:
    """The (group, CIDR) of every subnet, exactly as CDK's `IpAddresses.cidr` allocates them
    (aws-ec2/lib/network-util.ts, NetworkBuilder.addSubnets: the next free address, rounded up to the
    subnet's own size, and an error when the unrounded end passes the VPC's last address), or None when
    the layout does not fit the VPC (synth would die in a jsii error)."""
    network = ipaddress.IPv4Network(vpc_cidr)
    first, last = int(network.network_address), int(network.broadcast_address)
    next_free, plan = first, []
    for group, prefix in SUBNET_LAYOUT:
        size = 2 ** (32 - prefix)
        if next_free + size * zones - 1 > last:
            return None
        for _ in range(zones):
            start = (next_free + size - 1) // size * size
            plan.append((group, f"{ipaddress.IPv4Address(start)}/{prefix}"))
            next_free = start + size
    return plan


def smallest_vpc_prefix(zones: int) -> int:
    """The largest prefix length (the smallest VPC) that the layout fits in `zones` AZs."""
    for prefix in range(28, 15, -1):
        if subnet_plan(f"10.0.0.0/{prefix}", zones) is not None:
            return prefix
    return 16


# --- Who reaches the public API endpoint ---------------------------------------------------------------
# The most public IPv4 addresses an endpoint allow-list may cover without allow_public_internet: a /8's
# worth (16.8 million). An office, VPN or CI egress list is a few /24s at most; a /8 is the largest block
# ever given to one organisation, so past it the list no longer restricts who reaches the API.
PUBLIC_ENDPOINT_LIMIT = 2**24
# Ranges a request to the public endpoint can never come from: private (RFC 1918), shared/CGNAT, loopback,
# link-local, "this network", IETF protocol assignments, benchmarking, multicast and reserved (IANA's
# special-purpose registry). Listing one is a mistake (in-VPC clients use the private endpoint): refused.
UNREACHABLE = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)
_UNREACHABLE_UNION = list(ipaddress.collapse_addresses(UNREACHABLE))
# The documentation ranges (RFC 5737: TEST-NET-1 to 3; the shipped dev.yaml's example is 198.51.100.0/24): nobody
# connects from them. Not refused (a placeholder in an example), not counted, and warned about.
DOCUMENTATION = tuple(ipaddress.IPv4Network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"))
# Not public either, but harmless: those and the retired 6to4 relay range.
_NOT_PUBLIC = list(
    ipaddress.collapse_addresses(UNREACHABLE + DOCUMENTATION + (ipaddress.IPv4Network("192.88.99.0/24"),))
)


def documentation_ranges(cidrs: Sequence[str]) -> list[str]:
    """The entries of `cidrs` that lie inside a documentation range."""
    found = []
    for cidr in cidrs:
        net = ipaddress.ip_network(cidr, strict=False)
        if net.version == 4 and any(net.subnet_of(doc) for doc in DOCUMENTATION):
            found.append(cidr)
    return found


def public_addresses(cidrs: Sequence[str]) -> int:
    """How many public IPv4 addresses the union of `cidrs` covers (overlaps counted once, special-purpose
    ranges not at all); IPv6 entries are ignored (EKS refuses them on an IPv4 cluster)."""
    union = list(
        ipaddress.collapse_addresses(
            net for net in (ipaddress.ip_network(c, strict=False) for c in cidrs) if net.version == 4
        )
    )
    total = 0
    for net in union:
        total += net.num_addresses
        for special in _NOT_PUBLIC:
            if special.subnet_of(net):
                total -= special.num_addresses
            elif net.subnet_of(special):
                total -= net.num_addresses
    return total


def endpoint_wide_open(cidrs: Sequence[str]) -> bool:
    """Whether the allow-list covers more public addresses than PUBLIC_ENDPOINT_LIMIT (what the synth
    warning for `allow_public_internet: true` should test, rather than a literal /0)."""
    return public_addresses(cidrs) > PUBLIC_ENDPOINT_LIMIT


def _overlap(net: ipaddress.IPv4Network, other: ipaddress.IPv4Network) -> int:
    """Two CIDR blocks either nest or are disjoint."""
    if other.subnet_of(net):
        return other.num_addresses
    return net.num_addresses if net.subnet_of(other) else 0


def is_unreachable(cidr: str) -> bool:
    """A range whose every address lies in UNREACHABLE, whether inside one of its blocks (10.0.0.0/8,
    192.168.1.0/24) or across several (224.0.0.0/3: multicast and reserved)."""
    net = ipaddress.ip_network(cidr, strict=False)
    if net.version != 4:
        return False
    return sum(_overlap(net, special) for special in _UNREACHABLE_UNION) == net.num_addresses


# --- How many GPUs one replica takes -------------------------------------------------------------------
# One replica of serving.prefill / serving.decode takes the product of all four factors (vLLM 0.26's
# ParallelConfig and Ray Serve LLM's DPServer); tests/config/test_workload_rules.py fails on a new *_parallel_size.
# Why: docs/DECISIONS.md, "GPUs per replica, and the known models' sizes".
PARALLEL_FACTORS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "prefill_context_parallel_size",
    "data_parallel_size",
)
NOT_PARALLEL_FACTORS = ("decode_context_parallel_size", "data_parallel_size_local")


@dataclass(frozen=True)
class Parallelism:
    tensor: int
    pipeline: int
    prefill_context: int
    data: int

    @property
    def engine_gpus(self) -> int:
        """One vLLM engine (one DP rank, one Ray Serve replica's placement group): TP x PP x PCP."""
        return self.tensor * self.pipeline * self.prefill_context

    @property
    def replica_gpus(self) -> int:
        """One replica as the stage file counts them (serving.prefill / serving.decode): every DP rank."""
        return self.engine_gpus * self.data

    @property
    def dense_weight_gpus(self) -> int:
        """The GPUs one copy of a dense model's weights is split over: TP shards each layer, PP splits the
        layers; PCP and DP ranks each hold their own copy (vLLM docs, "Data Parallel Deployment": "model
        weights are replicated across separate instances/GPUs")."""
        return self.tensor * self.pipeline

    def describe(self) -> str:
        """`TP 2` alone, else every factor above 1: `TP 1 x PP 2`, `TP 2 x DP 2`."""
        parts = [("PP", self.pipeline), ("PCP", self.prefill_context), ("DP", self.data)]
        return " x ".join([f"TP {self.tensor}"] + [f"{name} {size}" for name, size in parts if size != 1])


def parallel_setting(engine: Engine, name: str) -> object:
    """The value the engine runs with for one of PARALLEL_FACTORS: the typed field (tensor_parallel_size) or
    extra_args (the others: EngineArgs fields without a typed field), default 1. Raw: the rules check it."""
    if name in Engine.model_fields:
        return getattr(engine, name)
    return engine.extra_args.get(name, 1)


def parallelism(engine: Engine) -> Parallelism:
    """The parallel sizes of one engine; a value that is not a positive integer counts as 1 (config/rules/serving_roles.py
    refuses it before anything is built)."""
    sizes = []
    for name in PARALLEL_FACTORS:
        value = parallel_setting(engine, name)
        sizes.append(value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1)
    return Parallelism(*sizes)


def gpus_per_replica(engine: Engine) -> int:
    """GPUs one prefill or decode replica takes: TP x PP x PCP x DP (see PARALLEL_FACTORS)."""
    return parallelism(engine).replica_gpus


def idle_gpu_count(cfg: StageConfig) -> int:
    """GPUs of the Ray cluster (one worker pod per GPU node, holding its GPUs) that prefill and decode at their most
    replicas leave idle; a colocated stage runs that many replicas of its one engine (charts/serve_config.py)."""
    serving = cfg.serving
    used = sum(getattr(serving, role).most * gpus_per_replica(serving.engine_for(role)) for role in ROLES)
    return cfg.gpu_nodegroup.count * gpu_spec(cfg).gpus - used


# --- Does the model fit the GPUs of one engine? ------------------------------------------------------
# A floor, not a forecast: the check refuses only a stage whose weights plus this floor cannot fit even
# in theory; passing it does not promise that vLLM starts (activations, CUDA graphs, fragmentation).
GIB = 2**30
RUNTIME_RESERVE_GIB = 1.0  # CUDA context, activations of the profiling run, vLLM's own buffers


@dataclass(frozen=True)
class KnownModel:
    parameters: float  # all parameters in the checkpoint (vision tower and MTP head included)
    kv_bytes_per_token: int  # K and V of every attention layer at 16 bits (0: unknown)
    basis: str  # where the numbers come from
    # The Hugging Face organisation (lower case) whose copy of the model is gated: its page asks each account to
    # accept the licence, and a download without a token of such an account is refused (HTTP 401/403). "": not
    # gated. A copy under another organisation (a quantization, a mirror) is its own repository, gated or not as
    # its owner chose, so only this organisation's is marked (is_gated).
    gated_org: str = ""


# Keyed by config/engine_args.py model_key(): the repo's name (after the organisation), lower case (the Hub
# resolves repo ids case-insensitively; the GDN models are keyed the same way). Only models whose numbers can
# be traced; every one of them is dense (no expert layers: see model_memory_floor).
META = "meta-llama"
KNOWN_MODELS: dict[str, KnownModel] = {
    # Computed from its config.json (serving_lab/pins/qwen3.5-9b-config.json, tests/config/test_safety.py): 9.65e9
    # parameters, 17.98 GiB in bfloat16; KV 32 KiB per token (8 full-attention layers; DeltaNet keeps a state).
    # Why: docs/DECISIONS.md, "GPUs per replica, and the known models' sizes".
    "qwen3.5-9b": KnownModel(9.65e9, 32 * 1024, "Qwen3.5-9B's config.json"),
    # Computed from its config.json (serving_lab/pins/qwen3.5-27b-config.json, tests/config/test_safety.py): 27.78e9
    # parameters (the card's "27B" is 2.8% short of them), 51.7 GiB in bfloat16, as the official index's total_size
    # (serving_lab/pins/qwen3.5-27b-config.SOURCES.txt); KV: 16 full-attention layers x 4 KV heads x 256 x (K, V) x
    # 2 bytes = 64 KiB per token.
    "qwen3.5-27b": KnownModel(27.78e9, 64 * 1024, "Qwen3.5-27B's config.json"),
    # Llama 3.1 (model cards and config.json): 8.03e9, 32 layers x 8 KV heads x 128; 70.6e9, 80 layers. Gated
    # under meta-llama (the Llama 3.1 Community License is accepted on the model page first); Qwen3.5 is not.
    "llama-3.1-8b": KnownModel(8.03e9, 128 * 1024, "Llama 3.1's model card", META),
    "llama-3.1-8b-instruct": KnownModel(8.03e9, 128 * 1024, "Llama 3.1's model card", META),
    "meta-llama-3.1-8b": KnownModel(8.03e9, 128 * 1024, "Llama 3.1's model card", META),
    "meta-llama-3.1-8b-instruct": KnownModel(8.03e9, 128 * 1024, "Llama 3.1's model card", META),
    "llama-3.1-70b": KnownModel(70.6e9, 320 * 1024, "Llama 3.1's model card", META),
    "llama-3.1-70b-instruct": KnownModel(70.6e9, 320 * 1024, "Llama 3.1's model card", META),
    "meta-llama-3.1-70b": KnownModel(70.6e9, 320 * 1024, "Llama 3.1's model card", META),
    "meta-llama-3.1-70b-instruct": KnownModel(70.6e9, 320 * 1024, "Llama 3.1's model card", META),
}


def is_gated(source: str) -> bool:
    """Whether serving.model.source is a gated repository of KNOWN_MODELS: the model's key (model_key) marked with
    a gated_org, under that very organisation (Hugging Face ids are case-insensitive: compared in lower case)."""
    known = KNOWN_MODELS.get(model_key(source))
    org = source.split("/", 1)[0].lower() if "/" in source else ""
    return known is not None and bool(known.gated_org) and org == known.gated_org


# A size in the name ("Qwen2.5-72B-Instruct", "Qwen3.5-35B-A3B": the total comes first) is a rounded
# label: the floor takes 90% of it. "8x7B" and names without a size are not read.
NAME_SIZE = re.compile(r"(?i)(?:^|[-_])([0-9]+(?:\.[0-9]+)?)b(?=$|[-_])")
NAME_DISCOUNT = 0.9
# Checkpoints whose weights are smaller than the engine dtype: bytes per parameter by a marker in the name
# (gpt-oss ships its experts in MXFP4). vLLM's `quantization` argument is not a stage-file setting.
QUANT_MARKERS_4BIT = re.compile(r"(?i)awq|gptq|int4|w4a|nvfp4|mxfp4|fp4|4bit|4-bit|bnb|gguf|exl[23]|bpw|gpt-oss|q4")
QUANT_MARKERS_8BIT = re.compile(r"(?i)fp8|int8|w8a|8bit|8-bit|q8")
DTYPE_BYTES = {"auto": 2, "bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class MemoryFloor:
    parameters: float
    basis: str  # "Qwen3.5-9B's config.json", "declared", "the 72B in its name"
    bytes_per_parameter: float
    weights_gib: float
    kv_gib: float  # one sequence of max_model_len tokens (0 when the architecture is unknown)
    needed_gib: float  # weights + kv + RUNTIME_RESERVE_GIB
    available_gib: float  # GPU memory of one engine x gpu_memory_utilization
    gpus: int
    gpu_gib: float


def model_memory_floor(cfg: StageConfig, engine: Engine | None = None) -> MemoryFloor | None:
    """The least GPU memory one engine needs for the served model, or None when its size is unknown. `engine`: the
    settings it runs with (a PD role's, Serving.engine_for), serving.engine by default."""
    model = cfg.serving.model
    engine = cfg.serving.engine if engine is None else engine
    name = model.source.rstrip("/").rsplit("/", 1)[-1]
    known = KNOWN_MODELS.get(model_key(model.source))
    if model.parameters_billion is not None:
        parameters, basis = model.parameters_billion * 1e9, "serving.model.parameters_billion"
    elif known:
        parameters, basis = known.parameters, known.basis
    else:
        match = NAME_SIZE.search(name)
        if not match:
            return None
        parameters, basis = float(match.group(1)) * 1e9 * NAME_DISCOUNT, f"90% of the {match.group(1)}B in its name"
    if QUANT_MARKERS_4BIT.search(name):
        per_parameter = 0.5
    elif QUANT_MARKERS_8BIT.search(name):
        per_parameter = 1.0
    else:
        per_parameter = DTYPE_BYTES[engine.dtype]
    kv_scale = 0.5 if str(engine.extra_args.get("kv_cache_dtype", "auto")).startswith("fp8") else 1.0
    kv = known.kv_bytes_per_token * kv_scale * engine.max_model_len / GIB if known else 0.0
    spec = gpu_spec(cfg)
    # The GPUs whose memory holds one copy of the weights. A known model is dense: TP x PP. Any other may be a
    # mixture of experts, whose expert layers vLLM shards over every rank of the replica ("MoE layers will be
    # sharded according to the product of the tensor, prefill-context, and data parallel sizes", ParallelConfig
    # in vllm/config/parallel.py): a floor must not refuse what could fit, so it takes them all.
    par = parallelism(engine)
    gpus = par.dense_weight_gpus if known else gpus_per_replica(engine)
    gpu_gib = spec.gpu_memory_gib / spec.gpus
    weights = parameters * per_parameter / GIB
    return MemoryFloor(
        parameters=parameters,
        basis=basis,
        bytes_per_parameter=per_parameter,
        weights_gib=weights,
        kv_gib=kv,
        needed_gib=weights + kv + RUNTIME_RESERVE_GIB,
        available_gib=gpu_gib * gpus * engine.gpu_memory_utilization,
        gpus=gpus,
        gpu_gib=gpu_gib,
    )


def gpu_spec(cfg: StageConfig) -> InstanceSpec:
    return instance_spec(cfg.gpu_nodegroup.instance_type)


def system_spec(cfg: StageConfig) -> InstanceSpec:
    return instance_spec(cfg.system_nodegroup.instance_type)
