r"""The typed shape of a stage file. Field-level rules live here; rules across fields in rules.py.

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
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from . import names, versions

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
# config/rules_workload.py (serving_namespace, weight_cache).

Count = Annotated[int, Field(ge=0, le=1000)]
Positive = Annotated[int, Field(ge=1, le=1000)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _not_a_bool(value: Any) -> Any:
    """A bool is no number: strict mode refuses `true` for an int or float field, but a Literal of integers
    takes it as 1 (True == 1 in Python), so `log_retention_days: true` would read as one day."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got bool {value}")
    return value


NotBool = BeforeValidator(_not_a_bool)


class Network(Strict):
    vpc_cidr: str = "10.0.0.0/16"
    nat_gateways: Annotated[int, Field(ge=1, le=6)] = 1

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network in CIDR form ({exc})") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError("prefix must be /16 to /20 (room for public and private subnets in every AZ)")
        return value


class Endpoint(Strict):
    """Who reaches the Kubernetes API. No public CIDRs = a private-only endpoint."""

    public_access_cidrs: list[str] = Field(default_factory=list, max_length=40)
    private_access: bool = True
    allow_public_internet: bool = False

    @field_validator("public_access_cidrs")
    @classmethod
    def _cidrs(cls, values: list[str]) -> list[str]:
        for value in values:
            try:
                ipaddress.ip_network(value, strict=True)
            except ValueError:
                raise ValueError(f"{value!r} is not a network in CIDR form (e.g. 203.0.113.0/24)") from None
        return values

    @property
    def public(self) -> bool:
        return bool(self.public_access_cidrs)


class Cluster(Strict):
    name: Annotated[str, Field(pattern=CLUSTER_NAME)] | None = None  # default pd-inference-<stage>
    # The minors with a kubectl layer (config/versions.py KUBECTL_LAYERS), the previous one too.
    kubernetes_version: Literal[versions.KUBERNETES_VERSIONS] = "1.35"  # type: ignore[valid-type]
    endpoint: Endpoint = Field(default_factory=Endpoint)
    # Who can use kubectl: each IAM role or user here gets an access entry with AmazonEKSClusterAdminPolicy.
    # No person does otherwise: the other entries are the kubectl provider's Lambda role, the verify
    # runner's role (narrow RBAC) and, from EKS itself, the cluster's creator, CloudFormation's execution
    # role (docs/OPERATIONS.md: "First deploy: who can use kubectl").
    admin_principal_arns: list[Annotated[str, Field(pattern=IAM_PRINCIPAL_ARN, max_length=2048)]] = Field(
        default_factory=list, max_length=20
    )
    # An empty admin_principal_arns is refused unless this says, on purpose, that the stage makes no one a
    # cluster admin: access entries are then created outside this app (by hand or by another stack). True
    # together with a non-empty list is refused as contradictory (config/rules.py: _admins).
    allow_no_admin_principals: bool = False
    log_retention_days: Annotated[Literal[LOG_RETENTION_DAYS], NotBool] = 30  # type: ignore[valid-type]


class SystemNodegroup(Strict):
    instance_type: str = "m7i.xlarge"
    min_size: Positive = 1
    desired_size: Positive = 1
    max_size: Positive = 2
    root_volume_gib: Annotated[int, Field(ge=20, le=16384)] = 50


class GpuNodegroup(Strict):
    instance_type: str = "g6.8xlarge"
    count: Positive = 2
    min_size: Count | None = None
    max_size: Positive | None = None
    efa: bool = True
    placement_group: bool = False
    root_volume_gib: Annotated[int, Field(ge=50, le=16384)] = 200
    capacity_type: Literal["on_demand", "spot"] = "on_demand"

    @property
    def sizes(self) -> tuple[int, int, int]:
        """(min, desired, max): min = desired = max = count unless configured otherwise."""
        low = self.count if self.min_size is None else self.min_size
        high = self.count if self.max_size is None else self.max_size
        return low, self.count, high


class Addons(Strict):
    kuberay_operator: Annotated[str, Field(pattern=CHART_VERSION)] = versions.KUBERAY_OPERATOR.version
    nvidia_device_plugin: Annotated[str, Field(pattern=CHART_VERSION)] = versions.NVIDIA_DEVICE_PLUGIN.version
    efa_device_plugin: Annotated[str, Field(pattern=CHART_VERSION)] = versions.EFA_DEVICE_PLUGIN.version

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
    id: Annotated[str, Field(pattern=MODEL_ID, max_length=128)] = "qwen3.5-9b"
    source: Annotated[str, Field(pattern=MODEL_SOURCE, max_length=1024)] = "Qwen/Qwen3.5-9B"
    # Total parameters (every expert of a MoE, the vision tower of a VLM), for the check that the weights
    # fit the GPUs (config/derived.py). Needed only for a model the app does not know (KNOWN_MODELS) and
    # whose name does not say its size ("...-72B"): without it such a model is not checked.
    parameters_billion: Annotated[float, Field(gt=0, le=10000)] | None = None


EngineScalar = Union[StrictBool, StrictInt, StrictFloat, Annotated[str, Field(max_length=256)]]


class Engine(Strict):
    """vLLM engine settings (names and types are vLLM's EngineArgs: config/vllm_engine_args.json).
    Unset optional fields keep vLLM's default; `extra_args` reaches any other scalar EngineArgs field."""

    max_model_len: Annotated[int, Field(ge=1, le=1_048_576)] = 4096
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "bfloat16"
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=0.99)] = 0.90
    enforce_eager: bool = True
    tensor_parallel_size: Annotated[int, Field(ge=1, le=64)] = 1
    max_num_seqs: Annotated[int, Field(ge=1, le=65536)] | None = None
    max_num_batched_tokens: Annotated[int, Field(ge=1, le=4194304)] | None = None
    enable_prefix_caching: bool | None = None
    # FlashInfer's GDN prefill kernel is missing on compute capability 9.x (H100/H200) in vLLM 0.26:
    # Qwen3.5 there needs "triton" (checked in config/rules.py).
    gdn_prefill_backend: Literal["flashinfer", "triton", "cutedsl"] | None = None
    extra_args: dict[Annotated[str, Field(pattern=ENGINE_ARG, max_length=64)], EngineScalar] = Field(
        default_factory=dict, max_length=32
    )

    @field_validator("extra_args")
    @classmethod
    def _known_to_vllm(cls, values: dict[str, Any]) -> dict[str, Any]:
        from .engine_args import check_extra

        for name, value in values.items():
            problem = check_extra(name, value)
            if problem:
                raise ValueError(problem)
        return values

    def vllm_kwargs(self) -> dict[str, Any]:
        """The engine_kwargs of an LLMConfig, in a stable order; unset optional settings are left out."""
        kwargs: dict[str, Any] = {
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "enforce_eager": self.enforce_eager,
            "tensor_parallel_size": self.tensor_parallel_size,
        }
        for name in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching", "gdn_prefill_backend"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        kwargs.update(self.extra_args)
        return kwargs


class Replicas(Strict):
    """A fixed count (`replicas`), or Ray Serve autoscaling between `min_replicas` and `max_replicas`."""

    replicas: Positive | None = None
    min_replicas: Count | None = None
    max_replicas: Positive | None = None

    @model_validator(mode="after")
    def _one_form(self) -> Replicas:
        fixed = self.replicas is not None
        scaled = self.min_replicas is not None or self.max_replicas is not None
        if fixed == scaled:
            raise ValueError("set either replicas, or min_replicas and max_replicas")
        if scaled and (self.min_replicas is None or self.max_replicas is None):
            raise ValueError("autoscaling needs both min_replicas and max_replicas")
        if scaled and self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        return self

    @property
    def most(self) -> int:
        return self.replicas if self.replicas is not None else self.max_replicas


class WorkerResources(Strict):
    """Per Ray worker pod (one per GPU node). Omitted values derive from the GPU instance type."""

    cpu_request: Annotated[int, Field(ge=1, le=1024)] | None = None
    cpu_limit: Annotated[int, Field(ge=1, le=1024)] | None = None
    memory_request_gib: Annotated[int, Field(ge=1, le=4096)] | None = None
    memory_limit_gib: Annotated[int, Field(ge=1, le=4096)] | None = None
    shm_gib: Annotated[int, Field(ge=1, le=1024)] = 8


class HeadResources(Strict):
    cpu_request: Annotated[int, Field(ge=1, le=64)] = 2
    cpu_limit: Annotated[int, Field(ge=1, le=64)] = 3
    memory_request_gib: Annotated[int, Field(ge=1, le=512)] = 8
    memory_limit_gib: Annotated[int, Field(ge=1, le=512)] = 12


class WeightCache(Strict):
    """A directory on the GPU node's root volume that outlives the pod: weights load once per node. Which host
    and container folders it may be: config/rules_workload.py weight_cache (an allowlist)."""

    enabled: bool = True
    host_path: Annotated[str, Field(pattern=ABSOLUTE_PATH, max_length=200)] = "/var/lib/model-cache"
    mount_path: Annotated[str, Field(pattern=ABSOLUTE_PATH, max_length=200)] = "/model-cache"


class Serving(Strict):
    mode: Literal["pd", "colocated"] = "pd"
    namespace: Annotated[str, Field(pattern=K8S_NAME)] = "inference"
    service_name: Annotated[str, Field(pattern=K8S_NAME, max_length=40)] = "ray-llm"
    image: Annotated[str, Field(pattern=IMAGE, min_length=3, max_length=255)] | None = None
    ray_version: Annotated[str, Field(pattern=RAY_VERSION)] = "2.58.0"
    model: Model = Field(default_factory=Model)
    engine: Engine = Field(default_factory=Engine)
    prefill: Replicas = Field(default_factory=lambda: Replicas(replicas=1))
    decode: Replicas = Field(default_factory=lambda: Replicas(replicas=1))
    kv_backend: Literal["LIBFABRIC", "UCX"] = "LIBFABRIC"
    worker_privilege: Literal["privileged", "ipc_lock"] = "privileged"
    worker_resources: WorkerResources = Field(default_factory=WorkerResources)
    head_resources: HeadResources = Field(default_factory=HeadResources)
    weight_cache: WeightCache = Field(default_factory=WeightCache)
    hf_token_secret: Annotated[str, Field(pattern=SECRET_REF, max_length=2048)] | None = None
    # Required: with a fixed pair of GPU nodes the choice decides whether a rayClusterConfig change
    # stalls (NewCluster needs twice the GPUs) or is applied only by recreating the pods (None).
    upgrade_strategy: Literal["None", "NewCluster"]
    client_namespaces: list[Annotated[str, Field(pattern=K8S_NAME)]] = Field(default_factory=list, max_length=20)
    # The opt-in engine arguments (config/rules_safety.py ENGINE_ARGS_OPT_IN: trust_remote_code, ...) that
    # engine.extra_args may turn on: each must be named here, and synth warns about each.
    allow_unsafe_engine_args: list[Annotated[str, Field(pattern=ENGINE_ARG, max_length=64)]] = Field(
        default_factory=list, max_length=32
    )


class WorkloadProfile(Strict):
    """One benchmark workload: fixed prompt and answer lengths, run once per concurrency level."""

    name: Annotated[str, Field(pattern=K8S_NAME, max_length=40)]
    input_tokens: Annotated[int, Field(ge=1, le=1_048_576)]
    output_tokens: Annotated[int, Field(ge=1, le=1_048_576)]
    concurrency: list[Annotated[int, Field(ge=1, le=4096)]] = Field(min_length=1, max_length=32)
    # Requests measured per level = concurrency x this (at least 16); a warm-up of `concurrency`
    # requests opens the connections first and is not counted.
    requests_per_stream: Annotated[int, Field(ge=1, le=1000)] = 8

    @field_validator("concurrency")
    @classmethod
    def _ascending(cls, values: list[int]) -> list[int]:
        if values != sorted(set(values)):
            raise ValueError("list each level once, in ascending order (e.g. [1, 8, 32, 64])")
        return values

    def request_count(self, concurrency: int) -> int:
        return max(16, concurrency * self.requests_per_stream)


def _default_profiles() -> list[WorkloadProfile]:
    sweep = [1, 4, 16, 32, 64]
    return [
        WorkloadProfile(name="chat", input_tokens=256, output_tokens=256, concurrency=sweep),
        WorkloadProfile(name="long-prompt", input_tokens=3500, output_tokens=200, concurrency=sweep),
    ]


class Benchmark(Strict):
    """What `python -m ops bench --stage NAME` runs against the stage's OpenAI endpoint."""

    profiles: list[WorkloadProfile] = Field(default_factory=_default_profiles, min_length=1, max_length=20)
    # The tokenizer the client counts tokens with: a Hugging Face id or a local folder; default the
    # served model's source (serving.model.source).
    tokenizer: Annotated[str, Field(min_length=1, max_length=512)] | None = None
    request_timeout_seconds: Annotated[int, Field(ge=10, le=86_400)] = 900
    random_seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = 42

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

    enabled: bool = True
    # Where the alarms notify (same region as the stage); unset = alarms without actions.
    alarm_topic_arn: Annotated[str, Field(pattern=SNS_TOPIC_ARN, max_length=512)] | None = None
    ttft_p99_slo_seconds: Annotated[float, Field(gt=0, le=600)] = 2.0
    error_rate_percent: Annotated[float, Field(gt=0, le=100)] = 5.0  # 5xx share of HTTP requests
    gpu_memory_percent: Annotated[float, Field(gt=0, le=100)] = 95.0  # GPU memory used, per node


class StageConfig(Strict):
    stage: Annotated[str, Field(pattern=NAME)]
    account: Annotated[str, Field(pattern=ACCOUNT)] | None = None
    region: Annotated[str, Field(pattern=REGION)]
    availability_zones: list[str] = Field(min_length=2, max_length=6)
    gpu_availability_zone: str
    network: Network = Field(default_factory=Network)
    cluster: Cluster = Field(default_factory=Cluster)
    system_nodegroup: SystemNodegroup = Field(default_factory=SystemNodegroup)
    gpu_nodegroup: GpuNodegroup = Field(default_factory=GpuNodegroup)
    addons: Addons = Field(default_factory=Addons)
    serving: Serving
    benchmark: Benchmark = Field(default_factory=Benchmark)
    observability: Observability = Field(default_factory=Observability)
    tags: dict[
        Annotated[str, Field(pattern=TAG_KEY, max_length=128)], Annotated[str, Field(pattern=TAG_VALUE, max_length=256)]
    ] = Field(default_factory=dict, max_length=names.MAX_STAGE_TAGS)

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str) -> str:
        from .rules_safety import region_problem  # the committed table of config/regions.json

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
