r"""The typed shape of a stage file. Field-level rules live here; rules across fields in config/rules/.

Every model forbids unknown keys and coerces nothing (strict): a string where a number belongs is an
error, not a silent conversion.

Every `pattern=` is anchored with `\A` and `\z`, start and end of the whole text. pydantic compiles
patterns with Rust's regex crate, where these are the unambiguous anchors; Python's `$` also matches
before a final newline, and Python's `\Z` is no Rust syntax (a schema error), so no spelling suits both
engines. Python's `re` before 3.14 rejects `\z`: reusing a pattern there fails loudly instead of
silently accepting `"dev\n"` (is_valid_name strips the anchors and uses fullmatch).
tests/config/test_safety.py checks every pattern.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    create_model,
    field_validator,
    model_validator,
)

from . import names, versions
from .engine_arg_classes import TYPED_ENGINE_ARGS
from .engine_args import check_extra
from .errors import short
from .regions import region_problem  # the committed table of config/regions.json
from .topology import SERVE_PORT, head_service, serve_service

NAME = r"\A[a-z][a-z0-9-]{0,30}[a-z0-9]\z"
REGION = r"\A[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]{1,2}\z"
ACCOUNT = r"\A[0-9]{12}\z"
K8S_NAME = r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\z"
CHART_VERSION = r"\Av?[0-9]+\.[0-9]+\.[0-9]+\z"
# What CloudWatch Logs accepts as a retention (stacks/retention.py maps each to CDK's RetentionDays;
# tests/stacks/test_versions_agree.py checks the two agree).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)
IAM_PRINCIPAL_ARN = r"\Aarn:aws(-[a-z]+)*:(iam|sts)::[0-9]{12}:(role|user|assumed-role)/[A-Za-z0-9_+=,.@/-]+\z"
SECRET_REF = r"\A(arn:aws(-[a-z]+)*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:)?[A-Za-z0-9_/+=.@-]+\z"
CLUSTER_NAME = r"\A[a-zA-Z][a-zA-Z0-9-]{0,99}\z"
ABSOLUTE_PATH = r"\A/[A-Za-z0-9_./-]+\z"
MODEL_ID = r"\A[A-Za-z0-9][A-Za-z0-9_.:-]*\z"
# A Hugging Face repo id, an absolute path (a local folder) or an S3 URI.
MODEL_SOURCE = r"\A([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+|/[A-Za-z0-9_./-]+|s3://[A-Za-z0-9_./-]+)\z"
SNS_TOPIC_ARN = r"\Aarn:aws(-[a-z]+)*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}\z"
IMAGE = r"\A[A-Za-z0-9_./:@-]+\z"
RAY_VERSION = r"\A[0-9]+\.[0-9]+\.[0-9]+\z"
ENGINE_ARG = r"\A[a-z][a-z0-9_]*\z"
# AWS tagging rules (the Resource Groups Tagging API, which every tagged service here follows): letters
# and digits in any script, spaces, and _ . : / = + - @; keys 1-128 characters, values 0-256. Only the
# plain space of Unicode's separators: U+2028 and friends would break a line in a log or console.
TAG_CHARS = r"[\p{L}\p{N} _.:/=+@-]"
TAG_KEY = rf"\A{TAG_CHARS}+\z"  # with max_length=128 (a counted Unicode class is too big for Rust's regex)
TAG_VALUE = rf"\A{TAG_CHARS}*\z"  # with max_length=256

# The namespace the serving stack may own and the weight cache's folders are allowlists in
# config/rules/serving.py serving_namespace, config/rules/weight_cache.py.

Count = Annotated[int, Field(ge=0, le=1000)]
Positive = Annotated[int, Field(ge=1, le=1000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _not_a_bool(value: Any) -> Any:
    """A bool is no number: strict mode refuses `true` for an int or float field, but a Literal of integers
    takes it as 1 (True == 1 in Python), so `log_retention_days: true` would read as one day."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got bool {value}")  # noqa: TRY004  pydantic turns only ValueError into a field error
    return value


NotBool = BeforeValidator(_not_a_bool)


def prefix_form_problem(value: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> str | None:
    """None when `value` is written as `network` itself, a.b.c.d/n. ipaddress also reads a netmask
    (/255.255.255.0), a hostmask (/0.0.0.255) or a bare address (a /32); EC2's CreateVpc (CidrBlock) and EKS's
    publicAccessCidrs take CIDR notation only, and refuse those at deploy time."""
    if str(network) == value:
        return None
    return f"{value!r} is not in prefix-length form (allowed: {network}, written a.b.c.d/n)"


class Network(Strict):
    """The stage's VPC (stacks/network.py): public, private and control-plane subnets in every AZ."""

    vpc_cidr: str = Field(
        "10.0.0.0/16",
        description="The VPC's IPv4 range, in CIDR form: a /16, or a /17 with 1 or 2 AZs. It must hold a /24 public, "
        "a /19 private and a /28 control-plane subnet per AZ (config/derived.py SUBNET_LAYOUT), which takes a /16 for "
        "3 AZs or more and a /17 for 1 or 2, and stay off the ranges AWS and the nodes reserve.",
    )
    nat_gateways: Annotated[int, Field(ge=1, le=6)] = Field(
        1, description="NAT gateways of the VPC (the private subnets' way out), at most one per AZ."
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network in CIDR form ({exc})") from None
        problem = prefix_form_problem(value, net)
        if problem:
            raise ValueError(problem)
        if not 16 <= net.prefixlen <= 20:
            raise ValueError("prefix must be /16, or /17 with 1 or 2 AZs (room for every AZ's subnets)")
        return value


class Endpoint(Strict):
    """Who reaches the Kubernetes API. No public CIDRs = a private-only endpoint."""

    public_access_cidrs: list[str] = Field(
        default_factory=list,
        max_length=40,
        description="The public IPv4 ranges that may reach the API (EKS publicAccessCidrs); empty: no public "
        "endpoint. Private, reserved and IPv6 ranges are refused, and more than a /8's worth of addresses in all "
        "needs allow_public_internet.",
    )
    private_access: bool = Field(
        True,
        description="Whether the API is also reachable from inside the VPC (the kubectl provider runs there): "
        "false is allowed only with a public endpoint open to 0.0.0.0/0.",
    )
    allow_public_internet: bool = Field(
        False,
        description="Accept public_access_cidrs covering more than a /8 of the internet (0.0.0.0/0 included); "
        "synth then warns.",
    )

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        seen: dict[ipaddress.IPv4Network | ipaddress.IPv6Network, str] = {}
        for value in values:
            try:
                network = ipaddress.ip_network(value, strict=True)
            except ValueError:
                raise ValueError(f"{value!r} is not a network in CIDR form (e.g. 203.0.113.0/24)") from None
            if network in seen:  # the same network, however written (a repeat is most likely a mistyped other)
                again = "listed twice" if seen[network] == value else f"{seen[network]!r} written another way"
                raise ValueError(f"{value!r} is {again}: list each range once")
            seen[network] = value
        return values  # each in its prefix-length form: config/rules/cluster.py names the entry

    @property
    def public(self) -> bool:
        return bool(self.public_access_cidrs)


class Cluster(Strict):
    """The EKS cluster (stacks/cluster.py)."""

    name: Annotated[str, Field(pattern=CLUSTER_NAME)] | None = Field(
        None, description="The EKS cluster's name; unset: pd-inference-<stage>."
    )
    # The minors with a kubectl layer (config/versions.py KUBECTL_LAYERS), the previous one too.
    kubernetes_version: Literal[versions.KUBERNETES_VERSIONS] = Field(  # type: ignore[valid-type]
        "1.35", description="The cluster's Kubernetes minor version (the ones with a kubectl layer in this app)."
    )
    endpoint: Endpoint = Field(default_factory=Endpoint, description="Who reaches the Kubernetes API endpoint.")
    # Who can use kubectl: each IAM role or user here gets an access entry with AmazonEKSClusterAdminPolicy.
    # No person does otherwise: the other entries are the kubectl provider's Lambda role, the verify
    # runner's role (narrow RBAC) and, from EKS itself, the cluster's creator, CloudFormation's execution
    # role (docs/OPERATIONS.md: "First deploy: who can use kubectl").
    admin_principal_arns: list[Annotated[str, Field(pattern=IAM_PRINCIPAL_ARN, max_length=2048)]] = Field(
        default_factory=list,
        max_length=20,
        description="IAM role or user ARNs that get an EKS access entry with AmazonEKSClusterAdminPolicy, each once "
        "(no STS session ARNs); empty needs allow_no_admin_principals: true.",
    )
    # An empty admin_principal_arns is refused unless this says, on purpose, that the stage makes no one a
    # cluster admin: access entries are then created outside this app (by hand or by another stack). True
    # together with a non-empty list is refused as contradictory (config/rules/cluster.py admin_access).
    allow_no_admin_principals: bool = Field(
        False,
        description="true: on purpose, this app makes no one a cluster admin (access entries are made elsewhere); "
        "refused together with a non-empty admin_principal_arns.",
    )
    log_retention_days: Annotated[Literal[LOG_RETENTION_DAYS], NotBool] = Field(  # type: ignore[valid-type]
        30,
        description="Days CloudWatch Logs keeps the stage's log groups: control plane, VPC flow logs, the Lambda "
        "handlers, the verify runner and the observability add-on's.",
    )
    # Written into the template either way (AWS::EKS::Cluster UpgradePolicy, whose own default is EXTENDED).
    support_type: Literal["standard", "extended"] = Field(
        "extended",
        description="What EKS does when the version's standard support ends: extended (the cluster stays on it, "
        "billed at the extended-support rate per cluster hour: README, What it costs) or standard (EKS upgrades "
        "the control plane to the next version itself).",
    )


class SystemNodegroup(Strict):
    """The CPU nodegroup `system` (stacks/nodegroups.py): the KubeRay operator, the Ray head, the add-ons."""

    instance_type: str = Field(
        "m7i.xlarge", description="A CPU instance type of config/instance_types.py (the Ray head must fit it)."
    )
    min_size: Positive = Field(1, description="The nodegroup's minimum size (min <= desired <= max).")
    desired_size: Positive = Field(1, description="The nodegroup's desired size.")
    max_size: Positive = Field(2, description="The nodegroup's maximum size.")
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = Field(
        100,
        description="Each node's root volume (encrypted gp3), in GiB; it holds the Ray head's image twice during "
        "an update (config/first_start.py gives the floor).",
    )


class GpuNodegroup(Strict):
    """The GPU nodegroup `gpu-worker` (stacks/nodegroups.py), in gpu_availability_zone alone: one Ray worker pod per
    node, holding all its GPUs and EFA interfaces."""

    instance_type: str = Field(
        "g6.8xlarge", description="A GPU instance type of config/instance_types.py (its GPUs, memory and EFA)."
    )
    count: Positive = Field(
        2,
        description="GPU nodes: the nodegroup's desired size and the Ray cluster's worker pods (one per node); "
        "every engine replica must fit their GPUs.",
    )
    min_size: Count | None = Field(None, description="The nodegroup's minimum size; unset: count.")
    max_size: Positive | None = Field(None, description="The nodegroup's maximum size; unset: count.")
    efa: bool = Field(
        True,
        description="Attach the instance type's EFA interfaces (the launch template) and run the EFA device plugin; "
        "needs an EFA type, and then kv_backend LIBFABRIC.",
    )
    placement_group: bool = Field(
        False,
        description="Launch the nodes in a cluster placement group (closer together, at the risk of "
        "InsufficientInstanceCapacity).",
    )
    root_volume_gib: Annotated[int, Field(ge=50, le=16384)] = Field(
        200, description="Each node's root volume (encrypted gp3), in GiB; it holds the weight cache."
    )
    capacity_type: Literal["on_demand", "spot"] = Field(
        "on_demand", description="The nodegroup's capacity type (EKS ON_DEMAND or SPOT)."
    )

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(min, desired, max): min = desired = max = count unless configured otherwise."""
        low = self.count if self.min_size is None else self.min_size
        high = self.count if self.max_size is None else self.max_size
        return low, self.count, high


class Addons(Strict):
    """The Helm charts the cluster stack installs (stacks/addons.py), by chart version."""

    kuberay_operator: Annotated[str, Field(pattern=CHART_VERSION)] = Field(
        versions.KUBERAY_OPERATOR.version, description="The kuberay-operator chart's version."
    )
    nvidia_device_plugin: Annotated[str, Field(pattern=CHART_VERSION)] = Field(
        versions.NVIDIA_DEVICE_PLUGIN.version,
        description="The nvidia-device-plugin chart's version; 0.19.0 to 0.19.2 are refused (they conflict with "
        "the EFA device plugin).",
    )
    efa_device_plugin: Annotated[str, Field(pattern=CHART_VERSION)] = Field(
        versions.EFA_DEVICE_PLUGIN.version,
        description="The aws-efa-k8s-device-plugin chart's version (installed when gpu_nodegroup.efa is true).",
    )

    @field_validator("nvidia_device_plugin")
    @classmethod
    def _not_broken(cls, value: str) -> str:
        if value.lstrip("v") in versions.NVIDIA_DEVICE_PLUGIN_BROKEN:
            raise ValueError(
                f"{value} conflicts with the EFA device plugin (any version but 0.19.0-0.19.2, "
                f"pinned: {versions.NVIDIA_DEVICE_PLUGIN.version})"
            )
        return value


class Model(Strict):
    """The served model: both LLMConfigs' model_loading_config."""

    id: Annotated[str, Field(pattern=MODEL_ID, max_length=128)] = Field(
        "qwen3.5-9b",
        description="The name clients ask for (the OpenAI `model`, /v1/models): model_loading_config.model_id. "
        "An id that names another model than source is warned about (lower case, letters and digits only, "
        "compared with source's repository name, or organisation + name).",
    )
    source: Annotated[str, Field(pattern=MODEL_SOURCE, max_length=1024)] = Field(
        "Qwen/Qwen3.5-9B",
        description="The Hugging Face repo id the pods download (org/name): model_loading_config.model_source. "
        "Local paths and s3:// are refused (the pods can load neither); a gated model needs "
        "serving.hf_token_secret.",
    )
    # Total parameters (every expert of a MoE, the vision tower of a VLM), for the check that the weights
    # fit the GPUs (config/derived.py). Needed only for a model the app does not know (KNOWN_MODELS) and
    # whose name does not say its size ("...-72B"): without it such a model is not checked.
    parameters_billion: Annotated[float, Field(gt=0, le=10000)] | None = Field(
        None,
        description="The model's total parameters, in billions, for the check that its weights fit one engine's "
        "GPUs; unset: the known-models table's, else the size in the name (90% of it), else not checked.",
    )


ENGINE_TEXT_CHARS = 256


def _engine_scalar(value: Any) -> bool | int | float | str:
    """An extra engine argument's value, judged once: a union of the four types reported a problem per type it tried
    (`tokenizer_mode.bool: expected boolean ...; and 3 more problems`)."""
    if isinstance(value, str) and len(value) > ENGINE_TEXT_CHARS:
        raise ValueError(f"text of {len(value)} characters (allowed: at most {ENGINE_TEXT_CHARS})")
    if not isinstance(value, (bool, int, float, str)):  # ValueError: pydantic reports only that from a validator
        got = "null" if value is None else short(value)
        raise ValueError(f"expected true/false, a number or text, got {got}")  # noqa: TRY004
    return value


EngineScalar = Annotated[
    StrictBool | StrictInt | StrictFloat | Annotated[str, Field(max_length=ENGINE_TEXT_CHARS)],
    BeforeValidator(_engine_scalar),
]
MAX_EXTRA_ARGS = 32


def _known_to_vllm(values: dict[str, Any]) -> dict[str, Any]:
    """Every extra engine argument is a field of vLLM's EngineArgs that a stage may set, with a value of its type
    (config/engine_args.py check_extra): the same check for serving.engine and a role's engine block."""
    for name, value in values.items():
        problem = check_extra(name, value)
        if problem:
            raise ValueError(problem)
    return values


ExtraArgs = Annotated[
    dict[Annotated[str, Field(pattern=ENGINE_ARG, max_length=64)], EngineScalar], AfterValidator(_known_to_vllm)
]


class Engine(Strict):
    """vLLM engine settings (names and types are vLLM's EngineArgs: config/vllm_engine_args.json).
    Unset optional fields keep vLLM's default; `extra_args` reaches any other scalar EngineArgs field."""

    max_model_len: Annotated[int, Field(ge=1, le=1_048_576)] = Field(
        4096,
        description="The context, in tokens (prompt + answer), engine_kwargs.max_model_len: one sequence's KV "
        "cache must fit beside the weights, and every benchmark profile within it.",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = Field(
        "bfloat16", description="The weights' and activations' dtype, engine_kwargs.dtype."
    )
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=0.99)] = Field(
        0.90,
        description="The share of each GPU's memory vLLM takes at start (weights and KV cache), "
        "engine_kwargs.gpu_memory_utilization; observability.gpu_memory_percent must be above it.",
    )
    enforce_eager: bool = Field(
        True, description="Run without CUDA graphs (faster start, slower decode), engine_kwargs.enforce_eager."
    )
    # vLLM's own modes are kept out of extra_args (compilation_config is reserved: it also names files and
    # code); this is the one mode a stage may choose, by what it does.
    cuda_graphs: Literal["decode_only"] | None = Field(
        None,
        description="With enforce_eager: false, which CUDA graphs the engine captures. Unset: vLLM's default "
        "(torch.compile, piecewise graphs for mixed batches and full graphs for decode batches). decode_only: full "
        "graphs for pure-decode batches of up to max_num_seqs sequences and no torch.compile, rendered as "
        "engine_kwargs.compilation_config {mode: 0, cudagraph_mode: FULL_DECODE_ONLY, max_cudagraph_capture_size: "
        "max_num_seqs} (vllm/config/compilation.py: 'good for decode instances in a P/D setup'). On an L4's budget "
        "vLLM sizes the KV cache after its first compile, whose buffers it counts: fix extra_args.kv_cache_memory_bytes "
        'with the default (docs/DECISIONS.md, "The engine\'s CUDA graph arms").',
    )
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = Field(
        1,
        description="GPUs per engine, all on one node (at most the GPU type's count; above 1 the engine's "
        "placement is STRICT_PACK), engine_kwargs.tensor_parallel_size. PD roles may differ where the larger is a "
        'multiple of the smaller (docs/DECISIONS.md, "Tensor parallel inside a node, and heterogeneous TP").',
    )
    max_num_seqs: Annotated[int, Field(ge=1, le=65536)] | None = Field(
        None, description="Sequences one engine batches at most, engine_kwargs.max_num_seqs; unset: vLLM's default."
    )
    max_num_batched_tokens: Annotated[int, Field(ge=1, le=4194304)] | None = Field(
        None,
        description="Tokens one engine step processes at most, engine_kwargs.max_num_batched_tokens; unset: vLLM's "
        "default.",
    )
    enable_prefix_caching: bool | None = Field(
        None,
        description="Reuse the KV cache of shared prompt prefixes, engine_kwargs.enable_prefix_caching; unset: "
        "vLLM's default.",
    )
    # FlashInfer's GDN prefill kernel is missing on compute capability 9.x (H100/H200) in vLLM 0.26:
    # Qwen3.5 there needs "triton" (checked in config/rules/serving_engine.py).
    gdn_prefill_backend: Literal["flashinfer", "triton", "cutedsl"] | None = Field(
        None,
        description="The Gated DeltaNet prefill kernel (Qwen3.5), engine_kwargs.gdn_prefill_backend; unset: vLLM's "
        "default (FlashInfer), refused for a GDN model on H100/H200, which need triton.",
    )
    extra_args: ExtraArgs = Field(
        default_factory=dict,
        max_length=MAX_EXTRA_ARGS,
        description="Any other scalar field of vLLM's EngineArgs (config/vllm_engine_args.json), name: value, added to "
        "engine_kwargs as given; reserved names are refused and opt-in ones need serving.allow_unsafe_engine_args "
        "(config/engine_arg_classes.py).",
    )

    def vllm_kwargs(self) -> dict[str, Any]:
        """The engine_kwargs of an LLMConfig, in a stable order; unset optional settings are left out. A typed field
        is rendered (and reserved from extra_args) by its name in config/engine_arg_classes.py TYPED_ENGINE_ARGS."""
        kwargs = {name: getattr(self, name) for name in TYPED_ENGINE_ARGS if getattr(self, name) is not None}
        if self.cuda_graphs == "decode_only":
            kwargs["compilation_config"] = decode_only_graphs(self.max_num_seqs)
        kwargs.update(self.extra_args)
        return kwargs


def decode_only_graphs(capture_size: int | None) -> dict[str, Any]:
    """cuda_graphs: decode_only as vLLM's compilation_config, full decode graphs of up to `capture_size` sequences.
    Full graphs without torch.compile: vllm/config/compilation.py ("full cudagraphs are supported with and without
    compilation"); the GDN layers support them (gdn_attn.py: UNIFORM_BATCH). A dict is what EngineArgs takes here
    (vllm/engine/arg_utils.py: "support `EngineArgs(compilation_config={...})`"); vllm.LLM ran exactly this on an
    H200 (evidence/2026-12-01-h200-tuned, profile-graphs-text.log)."""
    graphs: dict[str, Any] = {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}
    if capture_size is not None:
        graphs["max_cudagraph_capture_size"] = capture_size
    return graphs


def _not_null(value: Any) -> Any:
    """A role's engine block overrides what it names: null would read as "unset" in one place and "vLLM's
    default" in another, so it is refused; leaving the key out keeps serving.engine's value."""
    if value is None:
        raise ValueError("null is no setting here (allowed: a value of serving.engine's type, or leave the key out)")
    return value


def _role_engine_fields() -> dict[str, Any]:
    """RoleEngine's fields: each of Engine's, with the same type and range, unset by default."""
    fields: dict[str, Any] = {}
    for name, info in Engine.model_fields.items():
        annotation: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        if name == "extra_args":
            description = (
                "This role's extra engine arguments, merged key by key over serving.engine.extra_args (this role's "
                f"value wins), checked as serving.engine.extra_args; at most {MAX_EXTRA_ARGS} names together."
            )
            fields[name] = (annotation, Field(default_factory=dict, description=description))
        else:
            description = (
                f"This role's {name}, in place of serving.engine.{name} (same type and range); unset: that one."
            )
            fields[name] = (
                Annotated[annotation | None, BeforeValidator(_not_null)],
                Field(default=None, description=description),
            )
    return fields


# A role's own engine settings (serving.prefill.engine, serving.decode.engine), over serving.engine: every key of
# Engine, validated by the same field rules, none set by default. Serving.engine_for merges them.
RoleEngine = create_model(
    "RoleEngine",
    __base__=Strict,
    __module__=__name__,
    __doc__="Engine settings of one PD role over serving.engine: each key set here replaces serving.engine's, "
    "extra_args merge key by key (Serving.engine_for).",
    **_role_engine_fields(),
)


def merged_engine(shared: Engine, role: Any) -> Engine:
    """`shared` with every key `role` (a RoleEngine, or None) sets replaced by its value, and extra_args merged
    key by key (the role's value wins; a new key comes after the shared ones). Validated as an Engine again: the
    one way it fails is more than MAX_EXTRA_ARGS extra arguments together (config/rules/serving_roles.py refuses that first)."""
    if role is None:
        return shared
    data = shared.model_dump()
    for name in Engine.model_fields:
        value = getattr(role, name)
        if name == "extra_args":
            data[name] = {**data[name], **value}
        elif value is not None:
            data[name] = value
    return Engine.model_validate(data)


class Replicas(Strict):
    """A fixed count (`replicas`), or Ray Serve autoscaling between `min_replicas` and `max_replicas`."""

    replicas: Positive | None = Field(
        None,
        description="A fixed number of replicas, deployment_config.num_replicas; set either this or min_replicas "
        "and max_replicas.",
    )
    min_replicas: Count | None = Field(
        None,
        description="Ray Serve autoscaling's floor, deployment_config.autoscaling_config.min_replicas (with "
        "max_replicas).",
    )
    max_replicas: Positive | None = Field(
        None,
        description="Ray Serve autoscaling's ceiling, deployment_config.autoscaling_config.max_replicas; the "
        "replicas at their most must fit the GPU nodes.",
    )

    @model_validator(mode="after")
    def _one_form(self) -> Replicas:
        fixed = self.replicas is not None
        scaled = self.min_replicas is not None or self.max_replicas is not None
        if fixed == scaled:
            raise ValueError("set either replicas, or min_replicas and max_replicas")
        if scaled and (self.min_replicas is None or self.max_replicas is None):
            raise ValueError("autoscaling needs both min_replicas and max_replicas")
        low, high = self.min_replicas, self.max_replicas
        if low is not None and high is not None and low > high:
            raise ValueError(f"min_replicas {low} > max_replicas {high}")
        return self

    @property
    def most(self) -> int:
        if self.replicas is not None:
            return self.replicas
        assert self.max_replicas is not None  # _one_form: autoscaling has both bounds
        return self.max_replicas

    @property
    def fewest(self) -> int:
        if self.replicas is not None:
            return self.replicas
        assert self.min_replicas is not None  # _one_form: autoscaling has both bounds
        return self.min_replicas


ROLES = ("prefill", "decode")


class Role(Replicas):
    """One side of PD serving (serving.prefill, serving.decode): its replicas and, in PD mode only, engine settings
    of its own over serving.engine."""

    engine: RoleEngine | None = Field(
        None,
        description="This role's own engine settings over serving.engine (PD mode only: refused in colocated "
        "mode): each key set here replaces serving.engine's in this role's engine_kwargs, extra_args merge key by "
        "key; unset: serving.engine alone.",
    )


class WorkerResources(Strict):
    """Per Ray worker pod (one per GPU node). Omitted values derive from the GPU instance type."""

    cpu_request: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        None, description="The Ray container's CPU request, in vCPUs; unset: a quarter of the node's."
    )
    cpu_limit: Annotated[int, Field(ge=1, le=1024)] | None = Field(
        None,
        description="The Ray container's CPU limit, in vCPUs (at most the node's less 1); unset: half of the node's.",
    )
    memory_request_gib: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None, description="The Ray container's memory request, in GiB; unset: a quarter of the node's."
    )
    memory_limit_gib: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None,
        description="The Ray container's memory limit, in GiB (with shm_gib at most the node's less 4); unset: half "
        "of the node's.",
    )
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = Field(
        8, description="The size of /dev/shm (a memory-backed emptyDir), in GiB."
    )


class HeadResources(Strict):
    """The Ray head pod's container, on a system node (its limits within the node less 1 vCPU and 4 GiB)."""

    cpu_request: Annotated[int, Field(ge=1, le=64)] = Field(2, description="CPU request, in vCPUs.")
    cpu_limit: Annotated[int, Field(ge=1, le=64)] = Field(3, description="CPU limit, in vCPUs.")
    memory_request_gib: Annotated[int, Field(ge=1, le=512)] = Field(8, description="Memory request, in GiB.")
    memory_limit_gib: Annotated[int, Field(ge=1, le=512)] = Field(12, description="Memory limit, in GiB.")


class WeightCache(Strict):
    """A directory on the GPU node's root volume that outlives the pod: weights load once per node. Which host
    and container folders it may be: config/rules/weight_cache.py (an allowlist)."""

    enabled: bool = Field(
        True, description="Mount the cache into the Ray workers and point HF_HOME at it; false: download per pod."
    )
    host_path: Annotated[str, Field(pattern=ABSOLUTE_PATH, max_length=200)] = Field(
        "/var/lib/model-cache",
        description="The node's folder (a hostPath, DirectoryOrCreate): /var/lib/model-cache or a folder below it.",
    )
    mount_path: Annotated[str, Field(pattern=ABSOLUTE_PATH, max_length=200)] = Field(
        "/model-cache",
        description="Where the Ray container sees it (HF_HOME is <mount_path>/huggingface): /model-cache, /models, "
        "or a folder below them or below /mnt.",
    )
    kernels: bool = Field(
        True,
        description="Keep the engines' compiled kernels there too (<mount_path>/kernels: Triton, FlashInfer, vLLM's "
        "and Inductor's caches), so a pod restarted on the node skips compiling them.",
    )


class Serving(Strict):
    """The RayService the serving stack applies (charts/inference.py) and its serveConfigV2 (charts/serve_config.py)."""

    mode: Literal["pd", "colocated"] = Field(
        "pd",
        description="pd: build_pd_openai_app, prefill and decode engines moving the KV cache with NIXL; colocated: "
        "build_openai_app, prefill + decode replicas of one engine doing both phases (the baseline on the same GPUs).",
    )
    namespace: Annotated[str, Field(pattern=K8S_NAME)] = Field(
        "inference",
        description="The namespace the serving stack creates (and deletes on destroy) for the Ray pods: not default, "
        "kube-* or an add-on's.",
    )
    service_name: Annotated[str, Field(pattern=K8S_NAME, max_length=40)] = Field(
        "ray-llm",
        description="The RayService's name, also its service account's and the prefix of its Services "
        f"({serve_service('<name>')}, {head_service('<name>')}).",
    )
    image: Annotated[str, Field(pattern=IMAGE, min_length=3, max_length=255)] | None = Field(
        None,
        description="The Ray pods' container image; unset: the Ray Serve LLM Deep Learning Container of the stage's "
        "region (config/versions.py dlc_image).",
    )
    ray_version: Annotated[str, Field(pattern=RAY_VERSION)] = Field(
        "2.58.0",
        description="The RayService's rayVersion; must equal the image's Ray when its tag is a known one "
        "(config/versions.py DLC_RAY_VERSIONS).",
    )
    model: Model = Field(default_factory=Model, description="The served model.")
    engine: Engine = Field(
        default_factory=Engine,
        description="vLLM engine settings of every engine (a PD role's own engine block overrides them key by key).",
    )
    prefill: Role = Field(
        default_factory=lambda: Role(replicas=1),
        description="The prefill deployment (PD mode): its replicas and optional engine block; in colocated mode its "
        "replicas count toward the colocated engine's.",
    )
    decode: Role = Field(
        default_factory=lambda: Role(replicas=1),
        description="The decode deployment (PD mode): its replicas and optional engine block; in colocated mode its "
        "replicas count toward the colocated engine's.",
    )
    kv_backend: Literal["LIBFABRIC", "UCX"] = Field(
        "LIBFABRIC",
        description="NIXL's transport, kv_transfer_config.kv_connector_extra_config.backends; with EFA it must be "
        "LIBFABRIC (UCX runs at TCP speed there).",
    )
    kv_transfer_floor_gbps: Annotated[float, Field(gt=0, le=3200)] | None = Field(
        None,
        description="PD mode: the lowest KV-cache transfer rate, in Gbps per transfer, that `ops verify` passes and "
        "the NIXL rate alarm accepts; unset on an EFA stage: a quarter of one EFA interface's bandwidth "
        "(config/derived.py kv_transfer_floor_gbps; g6.8xlarge: 6.25); required with gpu_nodegroup.efa false.",
    )
    serve_ingress: Literal["serve_proxy", "haproxy"] = Field(
        "serve_proxy",
        description="How requests reach the replicas: serve_proxy, Serve's Python proxy; haproxy, Serve's HAProxy "
        "ingress with the engines' servers streaming to it themselves: vLLM's own colocated, the decode server in PD "
        '(charts/serve_ingress.py; docs/DECISIONS.md, "Ray Serve\'s faster paths").',
    )
    stream_batching_ms: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        None,
        description="How long each engine's LLMServer gathers a stream's tokens before it sends them, in ms "
        "(LLMConfig.experimental_configs.stream_batching_interval_ms); unset: 0 for PD under serve_ingress haproxy, "
        "else Ray's default, 50 (ray/llm/_internal/serve/constants.py). The first token waits for the first tick; 0 "
        "sends each token as it comes. Colocated under haproxy no LLMServer streams, so it has no effect there "
        '(docs/DECISIONS.md, "Stream batching").',
    )
    worker_privilege: Literal["privileged", "ipc_lock"] = Field(
        "privileged",
        description="The Ray worker container's security context: privileged, or ipc_lock: only the IPC_LOCK "
        "capability (all others dropped, run as uid 0 so that it is effective), which is what EFA's memory "
        'registration needs beside the EFA devices the pod requests (docs/DECISIONS.md, "What EFA needs in the '
        'pod").',
    )
    worker_resources: WorkerResources = Field(
        default_factory=WorkerResources, description="The Ray worker pod's container, one per GPU node."
    )
    head_resources: HeadResources = Field(default_factory=HeadResources, description="The Ray head pod's container.")
    weight_cache: WeightCache = Field(
        default_factory=WeightCache, description="The node folder the weights download to once per node."
    )
    hf_token_secret: Annotated[str, Field(pattern=SECRET_REF, max_length=2048)] | None = Field(
        None,
        description="The name or ARN of the Secrets Manager secret (the stage's region and account) holding the "
        "Hugging Face token as plain text, mounted into the Ray pods as the file HF_TOKEN_PATH names "
        '(docs/OPERATIONS.md, "Hugging Face token secret"); required for a gated model; unset: anonymous downloads.',
    )
    # Required: with a fixed pair of GPU nodes the choice decides whether a rayClusterConfig change
    # stalls (NewCluster needs twice the GPUs) or is applied only by recreating the pods (None).
    upgrade_strategy: Literal["None", "NewCluster"] = Field(
        description="The RayService's upgradeStrategy.type, required: None applies a Ray cluster change by "
        "recreating the pods in place (a brief outage); NewCluster starts a second cluster first (twice the GPUs, "
        "so it stalls on a fixed set of nodes)."
    )
    client_namespaces: list[Annotated[str, Field(pattern=K8S_NAME)]] = Field(
        default_factory=list,
        max_length=20,
        description=f"Namespaces whose pods may reach Serve's port {SERVE_PORT} on the Ray pods (a NetworkPolicy), "
        "each once, not the serving namespace itself.",
    )
    # The opt-in engine arguments (config/engine_arg_classes.py ENGINE_ARGS_OPT_IN: trust_remote_code, ...) that
    # engine.extra_args may turn on: each must be named here, and synth warns about each.
    allow_unsafe_engine_args: list[Annotated[str, Field(pattern=ENGINE_ARG, max_length=64)]] = Field(
        default_factory=list,
        max_length=32,
        description="The opt-in engine arguments (trust_remote_code, enable_prompt_embeds, ...: config/engine_arg_classes.py "
        "ENGINE_ARGS_OPT_IN) an extra_args may turn on, each once and each turned on by some engine; synth warns "
        "about them.",
    )

    def engine_roles(self) -> tuple[str | None, ...]:
        """The engines the mode runs, as engine_for takes them: prefill and decode in PD mode, the one
        colocated engine (None) otherwise."""
        return ROLES if self.mode == "pd" else (None,)

    def engine_for(self, role: str | None) -> Engine:
        """The engine settings `role` ("prefill", "decode") runs with: serving.engine with the role's own engine
        block over it (merged_engine). None, or a colocated stage: serving.engine alone."""
        if role is None or self.mode != "pd":
            return self.engine
        return merged_engine(self.engine, getattr(self, role).engine)

    def engine_field(self, role: str | None, key: str) -> str:
        """The stage-file path of engine setting `key` (`extra_args.NAME` for an extra argument) as `role` runs
        it, for a message: the role's engine block when it sets the key, else serving.engine."""
        block = getattr(self, role).engine if role is not None and self.mode == "pd" else None
        if block is not None:
            if key.startswith("extra_args."):
                sets = key.removeprefix("extra_args.") in block.extra_args
            else:
                sets = getattr(block, key) is not None
            if sets:
                return f"serving.{role}.engine.{key}"
        return f"serving.engine.{key}"


class WorkloadProfile(Strict):
    """One benchmark workload: fixed prompt and answer lengths, run once per concurrency level."""

    name: Annotated[str, Field(pattern=K8S_NAME, max_length=40)] = Field(
        description="The profile's name (unique in the list), in results and reports."
    )
    input_tokens: Annotated[int, Field(ge=1, le=1_048_576)] = Field(
        description="Prompt length, in tokens; with output_tokens within the served max_model_len."
    )
    output_tokens: Annotated[int, Field(ge=1, le=1_048_576)] = Field(description="Answer length, in tokens.")
    concurrency: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        min_length=1,
        max_length=32,
        description="Requests in flight, one run per level, each level once in ascending order.",
    )
    # Requests measured per level = concurrency x this (at least 16); a warm-up of `concurrency`
    # requests opens the connections first and is not counted.
    requests_per_stream: Annotated[int, Field(ge=1, le=1000)] = Field(
        8,
        description="Requests measured per level: concurrency x this, at least 16 (a warm-up of `concurrency` "
        "requests is not counted).",
    )
    # The open-loop sweep beside it (docs/BENCHMARK.md): requests per second, one run each with Poisson
    # arrivals and no cap on requests in flight; none by default.
    request_rates: list[Annotated[float, Field(ge=0.01, le=1000)]] = Field(
        default_factory=list,
        max_length=32,
        description="The open-loop sweep, in requests per second: one run per rate with Poisson arrivals and no cap "
        "on requests in flight, each rate once in ascending order; empty: none.",
    )

    @field_validator("concurrency", "request_rates")
    @classmethod
    def _ascending(cls, values: list, info) -> list:
        if values != sorted(set(values)):
            example = "[0.5, 1, 2, 4]" if info.field_name == "request_rates" else "[1, 8, 32, 64]"
            raise ValueError(f"list each level once, in ascending order (e.g. {example})")
        return values

    def request_count(self, concurrency: int) -> int:
        return max(16, concurrency * self.requests_per_stream)


def _default_profiles() -> list[WorkloadProfile]:
    sweep = [1, 4, 16, 32, 64]
    return [
        WorkloadProfile(name="chat", input_tokens=256, output_tokens=256, concurrency=sweep),
        WorkloadProfile(name="long-prompt", input_tokens=3500, output_tokens=200, concurrency=sweep),
    ]


class Slo(Strict):
    """The objectives of the benchmark's goodput (docs/BENCHMARK.md): a request is good when its time to first
    token is at most ttft_seconds and its inter-token latency ((end-to-end - TTFT) / (tokens - 1)) at most
    itl_seconds."""

    # Unset: observability.ttft_p99_slo_seconds, the stage's TTFT alarm threshold.
    ttft_seconds: Annotated[float, Field(gt=0, le=600)] | None = Field(
        None,
        description="Goodput's time-to-first-token objective, in seconds; unset: observability.ttft_p99_slo_seconds.",
    )
    # 0.1 s a token (10 tokens/s, faster than people read): DistServe's chatbot TPOT objective; above one
    # stream's floor on the dev stage's L4 (a 9B bf16 model reads ~18 GB of weights per token at 300 GB/s,
    # ~60 ms), so load, not the hardware alone, decides whether it is met.
    itl_seconds: Annotated[float, Field(gt=0, le=60)] = Field(
        0.1, description="Goodput's inter-token latency objective, in seconds per token."
    )


class Benchmark(Strict):
    """What `python -m ops bench --stage NAME` runs against the stage's OpenAI endpoint."""

    profiles: list[WorkloadProfile] = Field(
        default_factory=_default_profiles,
        min_length=1,
        max_length=20,
        description="The workloads, each run once per concurrency level (and request rate), names unique.",
    )
    # The tokenizer the client counts tokens with: a Hugging Face id or a local folder; default the
    # served model's source (serving.model.source).
    tokenizer: Annotated[str, Field(min_length=1, max_length=512)] | None = Field(
        None,
        description="The tokenizer the client counts tokens with: a Hugging Face id or a local folder; unset: "
        "serving.model.source.",
    )
    request_timeout_seconds: Annotated[int, Field(ge=10, le=86_400)] = Field(
        900,
        description="How long the client waits for one request, in seconds; observability.ttft_p99_slo_seconds "
        "must be below it.",
    )
    random_seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = Field(
        42, description="The seed of the synthetic prompts, so runs are comparable."
    )
    slo: Slo = Field(default_factory=Slo, description="The objectives goodput counts requests against.")

    @field_validator("profiles")
    @classmethod
    def _unique_names(cls, values: list[WorkloadProfile]) -> list[WorkloadProfile]:
        names = [profile.name for profile in values]
        if len(set(names)) != len(names):
            raise ValueError("two profiles share a name (each name once)")
        return values


class Observability(Strict):
    """CloudWatch collection (the amazon-cloudwatch-observability add-on), the stage's dashboard and alarms
    (docs/OBSERVABILITY.md)."""

    enabled: bool = Field(
        True, description="Install the CloudWatch Observability add-on and create the dashboard and alarms."
    )
    alarm_topic_arn: Annotated[str, Field(pattern=SNS_TOPIC_ARN, max_length=512)] | None = Field(
        None,
        description="The SNS topic the alarms notify, in the stage's region (and account, when set); unset: alarms "
        "without actions.",
    )
    ttft_p99_slo_seconds: Annotated[float, Field(gt=0, le=600)] = Field(
        2.0,
        description="The TtftP99 alarm's threshold: p99 time to first token, in seconds (at least 0.001, below "
        "benchmark.request_timeout_seconds).",
    )
    error_rate_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        5.0, description="The Http5xx alarm's threshold: the 5xx share of HTTP requests, in percent (below 100)."
    )
    gpu_memory_percent: Annotated[float, Field(gt=0, le=100)] = Field(
        95.0,
        description="The GpuMemory alarm's threshold: a node's GPU memory used, in percent; above the largest "
        "gpu_memory_utilization x 100 of the engines and below 100.",
    )


class StageConfig(Strict):
    """One stage file, config/<stage>.yaml: one AWS environment (network, cluster and serving stacks)."""

    stage: Annotated[str, Field(pattern=NAME)] = Field(
        description="The stage's name, equal to the file's name (<stage>.yaml); part of every stack and resource name."
    )
    account: Annotated[str, Field(pattern=ACCOUNT)] | None = Field(
        None, description="The AWS account to deploy to; unset: the account of the deploy-time credentials."
    )
    region: Annotated[str, Field(pattern=REGION)] = Field(
        description="The AWS region, one of the committed table's (config/regions.json)."
    )
    availability_zones: list[str] = Field(
        min_length=2, max_length=6, description="The VPC's AZs, of the region, each once: subnets in every one."
    )
    gpu_availability_zone: str = Field(
        description="The AZ of every GPU node (EFA traffic does not cross AZs), one of availability_zones."
    )
    network: Network = Field(default_factory=Network, description="The VPC.")
    cluster: Cluster = Field(default_factory=Cluster, description="The EKS cluster.")
    system_nodegroup: SystemNodegroup = Field(default_factory=SystemNodegroup, description="The CPU nodegroup.")
    gpu_nodegroup: GpuNodegroup = Field(default_factory=GpuNodegroup, description="The GPU nodegroup.")
    addons: Addons = Field(default_factory=Addons, description="The Helm charts' versions.")
    serving: Serving = Field(description="The inference service, required (serving.upgrade_strategy has no default).")
    benchmark: Benchmark = Field(default_factory=Benchmark, description="What `ops bench` runs.")
    observability: Observability = Field(default_factory=Observability, description="CloudWatch and the alarms.")
    tags: dict[
        Annotated[str, Field(pattern=TAG_KEY, max_length=128)], Annotated[str, Field(pattern=TAG_VALUE, max_length=256)]
    ] = Field(
        default_factory=dict,
        max_length=names.MAX_STAGE_TAGS,
        description="Tags on every resource of the stage (keys up to 128 and values up to 256 characters; no aws: "
        "prefix, in any case).",
    )

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        problem = region_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("tags", mode="before")
    @classmethod
    def _not_too_many(cls, values: Any) -> Any:
        if isinstance(values, dict) and len(values) > names.MAX_STAGE_TAGS:
            raise ValueError(
                f"{len(values)} tags (allowed: at most {names.MAX_STAGE_TAGS}: AWS takes "
                f"{names.AWS_TAGS_PER_RESOURCE} per resource and the app adds up to "
                f"{names.APP_TAGS_PER_RESOURCE} of its own)"
            )
        return values

    @field_validator("tags")
    @classmethod
    def _not_reserved(cls, values: dict[str, str]) -> dict[str, str]:
        for key in values:
            if key.lower().startswith("aws:"):
                raise ValueError(
                    f"{key!r}: the aws: prefix is reserved for AWS's own tags, in any case (allowed: any other key)"
                )
        return values

    @property
    def cluster_name(self) -> str:
        return names.cluster_name(self.stage, self.cluster.name)

    @property
    def image(self) -> str:
        return self.serving.image or versions.dlc_image(self.region)


def is_valid_name(value: str) -> bool:
    """Whether `value` is a valid stage name (the same check as the `stage` field: NAME is Rust regex
    syntax, see the top of this file)."""
    return isinstance(value, str) and re.fullmatch(NAME.removeprefix(r"\A").removesuffix(r"\z"), value) is not None


STAGE_FILE_SUFFIX = ".yaml"


def is_stage_file_name(file_name: str) -> bool:
    """Whether a file of this name is a stage: `<stage>.yaml` with a valid stage name, what the app reads from its
    config folder (config/loader.py stage_files) and nothing else (not dev.yml, not `dev.yaml `)."""
    stem = file_name.removesuffix(STAGE_FILE_SUFFIX)
    return file_name.endswith(STAGE_FILE_SUFFIX) and is_valid_name(stem)
