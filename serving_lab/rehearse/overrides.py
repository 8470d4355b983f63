"""The rehearsal plan: the stage's own serveConfigV2 with only the overrides one host needs.

Everything starts from `charts.serve_config.build_serve_config` (the code that renders the chart's
`serveConfigV2`) and `charts.worker_env.worker_environment` (the worker pod template's `env`). Each
change is an `Override` with the path it touches, the value before and after, and why; the plan is
printed before anything starts and written beside the results, so a reader sees exactly how the
rehearsal differs from what EKS would run. Nothing else may differ (tested against dev and prod).
`plan()` runs a list of small override functions, one concern each (PLAN_OVERRIDES, ENGINE_OVERRIDES,
ENV_OVERRIDES), over the facts `_start` derives once from the stage, the host and the options.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from charts.serve_config import build_serve_config
from charts.serve_ingress import (
    INGRESSES,
    SERVE_DEFAULT_MAXCONN,
    haproxy_descriptors,
    haproxy_maxconn,
    serve_ingress_environment,
)
from charts.worker_env import worker_environment
from config.engine_args import is_gdn_model
from config.instance_types import GPU_MEMORY_MIB, INSTANCE_TYPES
from config.schema import Replicas, Serving, StageConfig, decode_only_graphs

from . import port_slots
from .host import NODE_IP, Host

# Each shared engine's KV cache on an emulated budget: one figure for every engine (--kv-cache-bytes), one per
# engine config path (what kv_profile.py found for each), or None (each engine alone is profiled first).
KvCacheBytes = int | Mapping[str, int] | None

MODES = ("pd", "colocated")
OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class PlanError(Exception):
    """The stage cannot be rehearsed on this host; one line naming the field and the fix."""


@dataclass(frozen=True)
class Override:
    path: str
    before: Any
    after: Any
    reason: str

    def line(self) -> str:
        return f"override {self.path}: {_show(self.before)} -> {_show(self.after)} ({self.reason})"


@dataclass
class Plan:
    stage: str
    mode: str
    serving: Serving  # the serving section as rehearsed: the stage's, in `mode`, with --serve-ingress and the like
    serve_config: dict[str, Any]
    env: dict[str, str]
    num_gpus: int
    engines: int = 0  # GPUs the stage's engines ask for at their fewest (more than num_gpus when shared)
    overrides: list[Override] = field(default_factory=list)
    # With emulate_node: what the results measure, e.g. "L4 memory budget on an H200: memory emulated, speed
    # is the H200's" (printed, in plan-<mode>.json and in the benchmark results' note); "" otherwise.
    label: str = ""
    # Engine configs (their paths) whose KV cache one engine alone must size first: engines sharing a GPU on an
    # emulated budget with no figure given (serving_lab/rehearse/kv_profile.py); a plan with any is not run.
    kv_profiles: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "mode": self.mode,
            "num_gpus": self.num_gpus,
            "engines": self.engines,
            **({"label": self.label} if self.label else {}),
            **({"kv_profiles": self.kv_profiles} if self.kv_profiles else {}),
            "env": self.env,
            "overrides": [asdict(o) for o in self.overrides],
            "serve_config": self.serve_config,
        }


def _show(value: Any) -> str:
    return "(unset)" if value is _UNSET else repr(value)


_UNSET = object()


def llm_configs(serve_config: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each engine config (an LLMConfig) of the serve config, with its path in it."""
    (app,) = serve_config["applications"]
    args = app["args"]
    if "llm_configs" in args:
        for index, config in enumerate(args["llm_configs"]):
            yield f"applications[0].args.llm_configs[{index}]", config
    else:
        for side in ("prefill_config", "decode_config"):
            yield f"applications[0].args.{side}", args[side]


def _set(overrides: list[Override], container: dict[str, Any], key: str, value: Any, path: str, reason: str) -> None:
    before = container.get(key, _UNSET)
    if before == value:
        return
    container[key] = value
    overrides.append(Override(path, None if before is _UNSET else before, value, reason))


def _gpus_needed(replicas: Replicas, tensor_parallel: int) -> tuple[int, int]:
    """(GPUs at the fewest replicas, GPUs at the most)."""
    if replicas.replicas is not None:
        low = replicas.replicas
    else:
        assert replicas.min_replicas is not None  # Replicas' validator: a fixed count, or min and max
        low = max(replicas.min_replicas, 1)
    return low * tensor_parallel, replicas.most * tensor_parallel


# With --share-gpus, each engine's KV cache gets a fixed size instead of vLLM's profile of free memory:
# engines starting side by side on one GPU would otherwise count each other's memory as their own.
SHARED_KV_CACHE_FRACTION = 0.15


# vLLM 0.26 picks max_num_seqs and max_num_batched_tokens from the GPU it runs on when unset: 1024 and 8192
# on a device of at least 70 GiB without "a100" in its name, else 256 and 2048.
# Why: docs/DECISIONS.md, "The rehearsal: the stage's own config, overrides listed".
VLLM_LARGE_GPU_BYTES = 70 * 2**30
VLLM_OPENAI_DEFAULTS = {"large": (1024, 8192), "other": (256, 2048)}  # (max_num_seqs, max_num_batched_tokens)


def vllm_batch_defaults(memory_mib: int, gpu_name: str) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM 0.26's OpenAI server defaults to on this GPU."""
    large = memory_mib * 2**20 >= VLLM_LARGE_GPU_BYTES and "a100" not in gpu_name.lower()
    return VLLM_OPENAI_DEFAULTS["large" if large else "other"]


def _batch_settings(engine: dict[str, Any], defaults: tuple[int, int]) -> tuple[int, int]:
    """What vLLM 0.26 makes of `defaults` for these engine kwargs (`_set_default_max_num_seqs_and_batched_
    tokens_args`): a value the stage sets is kept; an unset one is the default, doubled in the "throughput"
    performance mode, the tokens capped at max_num_seqs x max_model_len (raised to max_model_len first
    without chunked prefill), the sequences at the tokens."""
    seqs_set, tokens_set = engine.get("max_num_seqs"), engine.get("max_num_batched_tokens")
    factor = 2 if engine.get("performance_mode") == "throughput" else 1
    seqs = seqs_set if seqs_set is not None else defaults[0] * factor
    tokens = tokens_set
    if tokens is None:
        length = engine["max_model_len"]
        tokens = defaults[1] * factor
        if engine.get("enable_chunked_prefill") is False:
            tokens = max(length, tokens)
        tokens = min(seqs * length, tokens)
    if seqs_set is None:
        seqs = min(seqs, tokens)
    return seqs, tokens


def _short(gpu_name: str) -> str:
    """ "NVIDIA H200" -> "H200" (nvidia-smi's name without the maker)."""
    return gpu_name.removeprefix("NVIDIA ").strip() or gpu_name


def _an(name: str) -> str:
    """The article before a GPU's name as read aloud: an H200, an L4, an A100, a T4."""
    return "an" if name[:1].upper() in "AEFHILMNORSX" else "a"


@dataclass(frozen=True)
class _Emulation:
    instance_type: str
    gpu_model: str
    target_mib: int
    host_gpu: str
    host_mib: int

    def utilization(self, stage: float) -> float:
        """The stage's fraction of the target's GPU as a fraction of the host's, rounded down (4 places)."""
        return math.floor(Fraction(str(stage)) * self.target_mib / self.host_mib * 10_000) / 10_000

    @property
    def size_class(self) -> str:
        if vllm_batch_defaults(self.target_mib, self.gpu_model) == VLLM_OPENAI_DEFAULTS["large"]:
            return "a GPU of 70 GiB or more, not an A100"
        return "an A100" if "a100" in self.gpu_model.lower() else "a GPU under 70 GiB"

    @property
    def label(self) -> str:
        host = _short(self.host_gpu)
        return f"{self.gpu_model} memory budget on {_an(host)} {host}: memory emulated, speed is the {host}'s"


def _emulation(cfg: StageConfig, host: Host, gpus: int) -> _Emulation:
    instance_type = cfg.gpu_nodegroup.instance_type
    spec = INSTANCE_TYPES.get(instance_type)
    if spec is None or not spec.gpu_model:
        raise PlanError(f"--emulate-node: config/instance_types.py: {instance_type}: no GPU model recorded for it")
    if spec.gpu_memory_mib <= 0:
        raise PlanError(
            f"--emulate-node: config/instance_types.py: {instance_type}: the memory of its {spec.gpu_model} is not "
            f"known (GPU_MEMORY_MIB has {', '.join(sorted(GPU_MEMORY_MIB))}); add the driver's figure "
            f"(nvidia-smi --query-gpu=memory.total) to emulate it"
        )
    used = host.gpus[:gpus]
    if len({gpu.memory_mib for gpu in used}) > 1:
        raise PlanError(
            f"--emulate-node: the host's GPUs differ in memory "
            f"({', '.join(sorted({f'{g.memory_mib} MiB' for g in used}))}): use --gpus N to keep "
            f"GPUs of one kind"
        )
    return _Emulation(
        instance_type=instance_type,
        gpu_model=spec.gpu_model,
        target_mib=spec.gpu_memory_mib,
        host_gpu=used[0].name,
        host_mib=used[0].memory_mib,
    )


NIXL_BACKENDS = ("UCX", "LIBFABRIC")
UCX_CUDA_IPC_READS = "UCX_CUDA_IPC_ENABLE_GET_ZCOPY"  # UCX's cuda_ipc config table: ENABLE_GET_ZCOPY
KV_BUFFER_DEVICES = ("cuda", "cpu")
# Variables the plan puts in front of the host's own value instead of replacing it: ray_cluster.PREPENDED.


@dataclass(frozen=True)
class Transport:
    """How the KV cache moves, where the rehearsal is told (ops rehearse --nixl-backend, --kv-buffer-device,
    --libfabric, --engine-env); the defaults keep the plan as it always was: UCX on a host without EFA."""

    nixl_backend: str | None = None  # None: the stage's on an EFA host, else UCX
    kv_buffer_device: str | None = None  # vLLM's kv_transfer_config.kv_buffer_device; None: vLLM's default (cuda)
    libfabric: str | None = None  # a libfabric tree (serving_lab/pins/libfabric.debs) for LIBFABRIC without EFA
    engine_env: tuple[tuple[str, str], ...] = ()  # more engine environment, e.g. UCX_TLS

    def keeps_libfabric(self, host: Host) -> bool:
        return self.nixl_backend == "LIBFABRIC" and not host.has_efa

    def runs_ucx(self, host: Host) -> bool:
        """NIXL over UCX: the plan's backend on a host without EFA unless LIBFABRIC is kept, or --nixl-backend UCX."""
        return self.nixl_backend == "UCX" or (not host.has_efa and not self.keeps_libfabric(host))


@dataclass(frozen=True)
class PlanRequest:
    """What one rehearsal asks of its plan: the mode, the host, the checkpoint and the command's options."""

    mode: str
    host: Host
    model_dir: Path
    real_weights: bool
    gpu_limit: int | None = None  # --gpus: use at most this many of the host's GPUs
    share_gpus: bool = False  # --share-gpus: engines share a GPU where the host has fewer than they need
    emulate_node: bool = False  # --emulate-node: each engine gets the stage GPU node's budget (_emulation)
    kv_cache_bytes: KvCacheBytes = None
    transport: Transport = field(default_factory=Transport)
    full_attention: bool = False  # --full-attention: model_folder.full_attention_config stands in for the model
    decode_weights: Path | None = None  # --decode-weights: the negative control's checkpoint for the decode engine
    traces: bool = False  # --ttft-phases: the engines export their request spans (_otlp_traces)
    cuda_graphs: str | None = None  # --cuda-graphs: ARM[@N] (cuda_graph_arm) in place of the stage's graphs
    serve_ingress: str | None = None  # --serve-ingress: serving.serve_ingress in place of the stage's
    stream_batching_ms: int | None = None  # --stream-batching-ms: serving.stream_batching_ms in place of the stage's


@dataclass
class _Build:
    """A plan being built: what every override reads (the stage, the request and the facts derived from them
    once) and what they write (the serve config, the worker env and the list of overrides)."""

    cfg: StageConfig
    request: PlanRequest
    serving: Serving  # as rehearsed: the stage's, in request.mode, with --serve-ingress
    serve_config: dict[str, Any]
    gpus: int  # the host's GPUs the rehearsal uses
    tp: int  # serving.engine.tensor_parallel_size
    low: int  # GPUs the stage's engines ask for at their fewest
    per_gpu: int  # engines on each GPU (1 unless --share-gpus had to share)
    spare: int  # GPUs beyond every side's minimum, handed out by _autoscaling_cap in engine order
    sm90: bool
    emulation: _Emulation | None
    configs: list[tuple[str, dict[str, Any]]]
    overrides: list[Override] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    kv_profiles: list[str] = field(default_factory=list)  # Plan.kv_profiles

    def set(self, container: dict[str, Any], key: str, value: Any, path: str, reason: str) -> None:
        _set(self.overrides, container, key, value, path, reason)

    def add(self, path: str, before: Any, after: Any, reason: str) -> None:
        self.overrides.append(Override(path, before, after, reason))

    @property
    def gdn_model(self) -> bool:
        """The served model has Gated DeltaNet layers: the stage's model does, unless --full-attention stands in."""
        return not self.request.full_attention and is_gdn_model(self.cfg.serving.model.source)


@dataclass(frozen=True)
class _Engine:
    """One engine config of the serve config (an LLMConfig) and its path in it."""

    index: int
    path: str
    llm: dict[str, Any]

    @property
    def kwargs(self) -> dict[str, Any]:
        return self.llm["engine_kwargs"]


def _rehearsed_serving(cfg: StageConfig, request: PlanRequest) -> Serving:
    """The stage's serving section in the request's mode, with its --serve-ingress and --stream-batching-ms."""
    if request.mode not in MODES:
        raise PlanError(f"--mode: {request.mode!r} (allowed: {', '.join(MODES)})")
    if request.serve_ingress is not None and request.serve_ingress not in INGRESSES:
        raise PlanError(f"--serve-ingress: {request.serve_ingress!r} (allowed: {', '.join(INGRESSES)})")
    changes: dict[str, Any] = {"mode": request.mode}
    if request.serve_ingress is not None:
        changes["serve_ingress"] = request.serve_ingress
    if request.stream_batching_ms is not None:
        changes["stream_batching_ms"] = request.stream_batching_ms
    return cfg.serving.model_copy(update=changes)


def _engines_per_gpu(cfg: StageConfig, low: int, gpus: int, share_gpus: bool) -> int:
    """1 where the host has a GPU for each of the `low` the engines need; more only with --share-gpus."""
    if low <= gpus:
        return 1
    if not share_gpus:
        raise PlanError(
            f"config/{cfg.stage}.yaml: serving: needs at least {low} GPUs "
            f"(prefill + decode x tensor_parallel_size), this host has {gpus} "
            f"(--share-gpus runs the engines side by side on fewer GPUs)"
        )
    return -(-low // gpus)


def _check_emulated_budgets(emulation: _Emulation, configs: list[tuple[str, dict[str, Any]]], per_gpu: int) -> None:
    """The engines sharing each GPU must fit it with their emulated budgets."""
    budgets = [emulation.utilization(llm["engine_kwargs"]["gpu_memory_utilization"]) for _, llm in configs]
    if per_gpu * max(budgets) > 1:
        raise PlanError(
            f"--emulate-node: {per_gpu} engine(s) on each GPU x {max(budgets):g} of the host's "
            f"{emulation.host_mib} MiB = {per_gpu * max(budgets):.4g} of it: the "
            f"{emulation.gpu_model} budgets of {emulation.instance_type} do not fit this host's "
            f"{_short(emulation.host_gpu)}"
        )


def _start(cfg: StageConfig, request: PlanRequest) -> _Build:
    """The stage's serve config as `request` asks and the facts the overrides read; a PlanError where the host
    cannot rehearse it."""
    serving = _rehearsed_serving(cfg, request)
    if request.decode_weights is not None and request.mode != "pd":
        raise PlanError("--decode-weights: a negative control of PD; the colocated mode has no decode engine")
    serve_config = copy.deepcopy(build_serve_config(serving))
    host = request.host
    gpus = len(host.gpus) if request.gpu_limit is None else min(request.gpu_limit, len(host.gpus))
    tp = serving.engine.tensor_parallel_size
    low = sum(_gpus_needed(r, tp)[0] for r in (serving.prefill, serving.decode))
    per_gpu = _engines_per_gpu(cfg, low, gpus, request.share_gpus)
    configs = list(llm_configs(serve_config))
    emulation = _emulation(cfg, host, gpus) if request.emulate_node else None
    if emulation:
        _check_emulated_budgets(emulation, configs, per_gpu)
    return _Build(
        cfg=cfg,
        request=request,
        serving=serving,
        serve_config=serve_config,
        gpus=gpus,
        tp=tp,
        low=low,
        per_gpu=per_gpu,
        spare=gpus - low,
        sm90=any(g.major == 9 for g in host.gpus),
        emulation=emulation,
        configs=configs,
    )


# The overrides, each one concern (as the rules of config/rules/), in the order they are recorded: the plan's own
# (PLAN_OVERRIDES), then each engine config's in turn (ENGINE_OVERRIDES for the first engine config, then for
# the second), then the worker environment's (ENV_OVERRIDES). Each reads the _Build and records what it changes
# with build.set / build.add, or raises PlanError.


def _other_mode(build: _Build) -> None:
    """The benchmark compares both modes on the same GPUs: the mode the stage does not run is rehearsed too."""
    if build.request.mode != build.cfg.serving.mode:
        build.add(
            "serving.mode",
            build.cfg.serving.mode,
            build.request.mode,
            "the other mode on the same GPUs, for the benchmark comparison",
        )


def _local_model_folder(build: _Build, engine: _Engine) -> None:
    build.set(
        engine.llm["model_loading_config"],
        "model_source",
        str(build.request.model_dir),
        f"{engine.path}.model_loading_config.model_source",
        "no network on the host: a local model folder"
        + ("" if build.request.real_weights else " (config, processor and tokenizer of the real model)"),
    )


def _dummy_weights(build: _Build, engine: _Engine) -> None:
    """Random weights of the real architecture, vision tower included: the model folder has the processor's
    configurations (serving_lab/rehearse/model_folder.py), so the engine builds and profiles the tower as on EKS
    and `language_model_only` stays what the stage sets (serving.engine.extra_args)."""
    if not build.request.real_weights:
        build.set(
            engine.kwargs,
            "load_format",
            "dummy",
            f"{engine.path}.engine_kwargs.load_format",
            "no weights on the host: random weights of the real architecture (compute and memory "
            "are the real model's, the text is noise)",
        )


def _full_attention_stand_in(build: _Build, engine: _Engine) -> None:
    """--full-attention: a model of the stage's model's size with every layer full attention, text only
    (model_folder.full_attention_config), so that vLLM 0.26's host KV buffer can hold its KV cache. The stage's
    language_model_only stays: vLLM reads it only for a multimodal model (vllm/config/model.py)."""
    if not build.request.full_attention:
        return
    build.add(
        f"{engine.path}.model_loading_config.model_source (architecture)",
        build.cfg.serving.model.source,
        "Qwen3ForCausalLM of its size, every layer full attention",
        "--full-attention: a stand-in whose KV cache vLLM 0.26's host buffer holds (the stage's Gated DeltaNet "
        "state layers it cannot); the KV bytes per full-attention layer are the model's own, the model is not",
    )


def _sm90_gdn_backend(build: _Build, engine: _Engine) -> None:
    if build.sm90 and build.gdn_model and "gdn_prefill_backend" not in engine.kwargs:
        build.set(
            engine.kwargs,
            "gdn_prefill_backend",
            "triton",
            f"{engine.path}.engine_kwargs.gdn_prefill_backend",
            "compute capability 9.x host: FlashInfer's SM90 GDN prefill kernel is unavailable "
            "(EngineDeadError on the first request); set serving.engine.gdn_prefill_backend for SM90 nodes",
        )


def _shared_gpu_placement(build: _Build, engine: _Engine) -> None:
    """A fraction of a GPU per engine worker: Ray packs the engines onto one GPU and Ray Serve LLM tells vLLM
    (VLLM_RAY_PER_WORKER_GPUS, ray/llm/_internal/serve/engines/vllm/vllm_models.py)."""
    if build.per_gpu > 1:
        build.set(
            engine.llm,
            "placement_group_config",
            # the stage's strategy (STRICT_PACK for TP, charts/serve_config.py TP_PLACEMENT) is kept
            {**engine.llm.get("placement_group_config", {}), "bundle_per_worker": {"GPU": round(1 / build.per_gpu, 3)}},
            f"{engine.path}.placement_group_config",
            f"{build.low} engines on {build.gpus} GPU(s): {build.per_gpu} engines share each GPU's compute",
        )


def _shared_gpu_memory(build: _Build, engine: _Engine) -> None:
    """Engines sharing a GPU: each its part of the memory and a KV cache of a fixed size."""
    if build.per_gpu <= 1:
        return
    kwargs, path = engine.kwargs, engine.path
    if build.emulation is None:
        share = round(int(kwargs["gpu_memory_utilization"] / build.per_gpu * 100) / 100 - 0.03, 2)
        build.set(
            kwargs,
            "gpu_memory_utilization",
            share,
            f"{path}.engine_kwargs.gpu_memory_utilization",
            f"{build.per_gpu} engines share each GPU: each asks for its part of the memory",
        )
        build.set(
            kwargs,
            "kv_cache_memory_bytes",
            int(build.request.host.gpus[0].memory_mib * 2**20 * SHARED_KV_CACHE_FRACTION),
            f"{path}.engine_kwargs.kv_cache_memory_bytes",
            "a fixed KV cache: engines starting side by side on one GPU cannot profile its free memory",
        )
    else:
        # Engines sharing a GPU cannot profile their emulated budgets side by side, so the KV cache comes from
        # one engine profiled alone on the same budget: --kv-cache-bytes (over a stage's fixed size too), the
        # stage's fixed size, or the rehearsal's own profile first.
        # Why: docs/DECISIONS.md, "The rehearsal: the stage's own config, overrides listed".
        given = build.request.kv_cache_bytes
        if isinstance(given, Mapping):
            figure, source = given.get(engine.path), "this engine's settings profiled alone on it first"
        else:
            figure, source = given, "--kv-cache-bytes"
        if figure is None:
            if "kv_cache_memory_bytes" not in kwargs:
                build.kv_profiles.append(engine.path)
            return
        build.set(
            kwargs,
            "kv_cache_memory_bytes",
            figure,
            f"{path}.engine_kwargs.kv_cache_memory_bytes",
            f"engines sharing a GPU on an emulated budget: the KV cache one engine alone found on it ({source}: "
            f"vLLM's fit figure), since side by side they cannot profile it",
        )


def _emulated_memory_budget(build: _Build, engine: _Engine) -> None:
    """--emulate-node: the stage's fraction of its node's GPU, as a fraction of the host's."""
    emulation = build.emulation
    if emulation:
        stage_util = engine.kwargs["gpu_memory_utilization"]
        build.set(
            engine.kwargs,
            "gpu_memory_utilization",
            emulation.utilization(stage_util),
            f"{engine.path}.engine_kwargs.gpu_memory_utilization",
            f"the {emulation.gpu_model} budget of {emulation.instance_type}: {stage_util:g} x "
            f"{emulation.target_mib} MiB of the host's {emulation.host_mib} MiB",
        )


def _emulated_batch_defaults(build: _Build, engine: _Engine) -> None:
    """--emulate-node: vLLM's batch defaults for the node's GPU, where the stage leaves them to vLLM."""
    emulation = build.emulation
    if not emulation:
        return
    kwargs = engine.kwargs
    target = _batch_settings(kwargs, vllm_batch_defaults(emulation.target_mib, emulation.gpu_model))
    native = _batch_settings(kwargs, vllm_batch_defaults(emulation.host_mib, emulation.host_gpu))
    for key, value, host_value in zip(("max_num_seqs", "max_num_batched_tokens"), target, native, strict=True):
        if key in kwargs:
            continue  # the stage's own setting is what EKS runs
        build.set(
            kwargs,
            key,
            value,
            f"{engine.path}.engine_kwargs.{key}",
            f"vLLM 0.26's default for the OpenAI server on the {emulation.gpu_model} of "
            f"{emulation.instance_type} ({emulation.size_class}: vllm/engine/arg_utils.py "
            f"EngineArgs.get_batch_defaults); on the host's {_short(emulation.host_gpu)} it would take "
            f"{host_value}",
        )


def _ucx_without_efa(build: _Build, engine: _Engine) -> None:
    """UCX where the host has no EFA device, unless --nixl-backend LIBFABRIC keeps the stage's backend; any host
    with --nixl-backend UCX. --nixl-backend LIBFABRIC on a stage of UCX sets LIBFABRIC."""
    kv = engine.kwargs.get("kv_transfer_config")
    if kv is None:
        return
    path = f"{engine.path}.engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends"
    wanted = build.request.transport.nixl_backend
    if wanted == "LIBFABRIC":
        build.set(
            kv["kv_connector_extra_config"],
            "backends",
            ["LIBFABRIC"],
            path,
            "--nixl-backend LIBFABRIC: the backend of the EFA stages",
        )
    elif not build.request.host.has_efa:
        build.set(
            kv["kv_connector_extra_config"],
            "backends",
            ["UCX"],
            path,
            "no EFA device on this host: NIXL over UCX (shared memory / TCP on one host); the EFA path "
            "is not exercised",
        )
    elif wanted == "UCX":
        build.set(kv["kv_connector_extra_config"], "backends", ["UCX"], path, "--nixl-backend UCX on an EFA host")


def _kv_buffer_device(build: _Build, engine: _Engine) -> None:
    """Where vLLM keeps the KV cache NIXL moves: --kv-buffer-device, or host memory where LIBFABRIC runs without EFA
    (NIXL's plugin on libfabric's tcp provider registers host memory only: evidence/2026-12-03-h200-libfabric/)."""
    kv = engine.kwargs.get("kv_transfer_config")
    if kv is None:
        return
    device = build.request.transport.kv_buffer_device
    if device is None and build.request.transport.keeps_libfabric(build.request.host):
        device = "cpu"
        reason = (
            "LIBFABRIC without EFA runs libfabric's tcp provider, on which NIXL's plugin registers host memory only: "
            "vLLM stages the KV cache through host memory (the stage's fallback if efa refuses the L4's memory)"
        )
    else:
        reason = "--kv-buffer-device"
    if device == "cpu":
        _refuse_host_buffer(build, chosen=reason == "--kv-buffer-device")
    if device is not None:
        build.set(
            kv, "kv_buffer_device", device, f"{engine.path}.engine_kwargs.kv_transfer_config.kv_buffer_device", reason
        )


def _refuse_host_buffer(build: _Build, *, chosen: bool) -> None:
    """vLLM 0.26's host KV buffer cannot hold a Gated DeltaNet model's state layers: every engine dies at start-up
    ("'list' object has no attribute 'shape'", nixl/base_worker.py initialize_host_xfer_buffer; seen on an H200)."""
    if not build.gdn_model:
        return
    source = build.cfg.serving.model.source
    asked = "--kv-buffer-device cpu" if chosen else "--nixl-backend LIBFABRIC without EFA (vLLM's host KV buffer)"
    raise PlanError(
        f"{asked}: vLLM 0.26's host KV buffer cannot hold {source}'s Gated DeltaNet state layers (its engines die "
        "at start-up: evidence/2026-12-02-h200-cuda-ipc/); --kv-buffer-device cuda keeps the KV cache on the "
        "GPU, which NIXL's LIBFABRIC plugin registers only on the efa provider (evidence/2026-12-03-h200-libfabric/); "
        "--full-attention serves "
        "a stand-in whose KV cache the host buffer holds"
    )


def _runtime_env_var(build: _Build, engine: _Engine, name: str, value: str, reason: str) -> None:
    """One variable of an engine config's own environment (runtime_env.env_vars), created where absent."""
    llm, path = engine.llm, engine.path
    if "env_vars" in llm.get("runtime_env", {}):
        build.set(llm["runtime_env"]["env_vars"], name, value, f"{path}.runtime_env.env_vars.{name}", reason)
    elif "runtime_env" in llm:
        build.set(llm["runtime_env"], "env_vars", {name: value}, f"{path}.runtime_env.env_vars", reason)
    else:
        build.set(llm, "runtime_env", {"env_vars": {name: value}}, f"{path}.runtime_env", reason)


def _tcpstore_port(build: _Build, engine: _Engine) -> None:
    """Engines side by side on one host: each its own TCPStore port window (serving_lab/rehearse/port_slots.py).
    An engine config gets its own base; a config that may run several replicas hands each replica a slot."""
    if _may_run_replicas(engine.llm):
        _replica_slots(build, engine)
    elif len(build.configs) > 1:
        reason = (
            "engines side by side on one host: each its own torch.distributed port range (in a pod each "
            "has its own network namespace); without it both take port 100 and one fails with EADDRINUSE"
        )
        base = port_slots.slot_base(port_slots.TCPSTORE_BASE, engine.index)
        _runtime_env_var(build, engine, "VLLM_DP_MASTER_PORT", str(base), reason)


def _replica_slots(build: _Build, engine: _Engine) -> None:
    """Each replica's worker claims a slot when it starts (port_slots.claim), named in the variable Ray's worker runs
    and in the runtime_env field that the engine's ray.init checks against it."""
    reason = (
        "replicas of one engine config side by side on one host share its environment: each replica's worker "
        "claims a port range of its own when it starts; without it they all take port 100 and all but one fail "
        "with EADDRINUSE (Serve restarts them)"
    )
    first = port_slots.slot_base(port_slots.TCPSTORE_BASE, len(build.configs))
    _runtime_env_var(build, engine, port_slots.FIRST_SLOT_VAR, str(first), reason)
    _runtime_env_var(build, engine, port_slots.RAY_HOOK_VAR, port_slots.HOOK, reason)
    field = "worker_process_setup_hook"
    why = (
        "Serve LLM names its own hook here, and the engine's ray.init refuses one that differs from the variable "
        "(ray/_private/runtime_env/setup_hook.py); the config's runtime_env wins over Serve LLM's (llm_server.py "
        "get_deployment_options), and the claim runs Serve LLM's hook after its own"
    )
    build.set(engine.llm["runtime_env"], field, port_slots.HOOK, f"{engine.path}.runtime_env.{field}", why)


def _may_run_replicas(llm: dict[str, Any]) -> bool:
    """More than one replica of the config may run at once (a fixed count above one, or autoscaling)."""
    deployment = llm["deployment_config"]
    return deployment.get("num_replicas", 1) > 1 or "autoscaling_config" in deployment


# NIXL's own Prometheus exporter (src/plugins/telemetry/prometheus/README.md of NIXL): exact byte and transfer-time
# counters per agent, where vLLM's NIXL histograms reach Ray's metrics only at bucket resolution. One port per
# engine config: engines side by side on one host would otherwise race for NIXL's default 9090.
NIXL_EXPORTER_BASE = 19090


def nixl_exporter_port(index: int) -> int:
    return NIXL_EXPORTER_BASE + index


def _nixl_exporter(build: _Build, engine: _Engine) -> None:
    """PD: the engines' NIXL agents export their transfers (rx/tx bytes, transfer time) on loopback."""
    if "kv_transfer_config" not in engine.kwargs:
        return
    reason = "the rehearsal measures each NIXL transfer's bytes and time exactly from NIXL's own exporter"
    port = str(nixl_exporter_port(engine.index))
    for name, value in (
        ("NIXL_TELEMETRY_ENABLE", "y"),
        ("NIXL_TELEMETRY_EXPORTER", "prometheus"),
        ("NIXL_TELEMETRY_PROMETHEUS_PORT", port),
        ("NIXL_TELEMETRY_PROMETHEUS_LOCAL", "y"),
    ):
        _runtime_env_var(build, engine, name, value, reason)


# The rehearsal's receiver of vLLM's request spans (serving_lab/rehearse/traces.py), on loopback: OTLP/HTTP's 4318 moved
# by 10000 as NIXL's 9090 above, so that a collector the host already runs keeps its port.
OTLP_TRACES_PORT = 14318
OTLP_TRACES_PATH = "/v1/traces"


def otlp_traces_endpoint() -> str:
    """The full URL: vLLM's HTTP exporter posts to an endpoint it is given verbatim (opentelemetry-exporter-otlp-proto-
    http 1.45.2 OTLPSpanExporter.__init__ appends no /v1/traces to it)."""
    return f"http://127.0.0.1:{OTLP_TRACES_PORT}{OTLP_TRACES_PATH}"


def _otlp_traces(build: _Build, engine: _Engine) -> None:
    """--ttft-phases: each engine exports one span per finished request (vLLM's llm_request) to the rehearsal's
    receiver, over OTLP/HTTP: vLLM's exporter speaks gRPC unless this variable says otherwise
    (vllm/tracing/otel.py get_span_exporter)."""
    if not build.request.traces:
        return
    reason = "--ttft-phases: the engines' request spans time each request's phases (serving_lab/rehearse/traces.py)"
    path = f"{engine.path}.engine_kwargs.otlp_traces_endpoint"
    build.set(engine.kwargs, "otlp_traces_endpoint", otlp_traces_endpoint(), path, reason)
    _runtime_env_var(build, engine, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf", reason)


# --cuda-graphs: issue #53's arms beside the stage's own, for measuring them on one host (docs/DECISIONS.md, "The
# engine's CUDA graph arms"). vllm-default: torch.compile with FULL_AND_PIECEWISE, vLLM's own. breakable: piecewise
# graphs without compile, which vLLM 0.26 runs only with VLLM_USE_BREAKABLE_CUDAGRAPH (else it captures none).
# decode-only: the stage field's value (config/schema.py decode_only_graphs), full decode graphs without compile.
CUDA_GRAPH_ARMS = ("vllm-default", "breakable", "decode-only")
# ARM@N: the largest batch, in tokens, captured as a graph (compilation_config.max_cudagraph_capture_size). vLLM's
# default is twice max_num_seqs, at most 512 (vllm/config/vllm.py `_set_cudagraph_sizes`): 64 for 32 sequences, so
# a 256-token prefill runs outside every graph unless N covers it.
CAPTURE_TOKENS = (1, 8192)
# The capture size as engine arguments, which vLLM refuses beside compilation_config's own (vllm/engine/arg_utils.py
# create_engine_config: "... are mutually exclusive"): an arm that sets it there takes the stage's out.
CAPTURE_ARGS = ("max_cudagraph_capture_size", "cudagraph_capture_sizes")
_ARM = re.compile(rf"({'|'.join(CUDA_GRAPH_ARMS)})(?:@([0-9]{{1,4}}))?")


def cuda_graph_arm(text: str) -> tuple[str, int | None]:
    """ARM or ARM@N -> (arm, N or None); a ValueError in one line for anything else."""
    found = _ARM.fullmatch(text)
    if not found:
        raise ValueError(f"{text[:40]!r} (allowed: {', '.join(CUDA_GRAPH_ARMS)}, each also with @N)")
    tokens = int(found[2]) if found[2] else None
    if tokens is not None and not CAPTURE_TOKENS[0] <= tokens <= CAPTURE_TOKENS[1]:
        raise ValueError(f"{text}: @N from {CAPTURE_TOKENS[0]} to {CAPTURE_TOKENS[1]}")
    return found[1], tokens


def _cuda_graph_arm(build: _Build, engine: _Engine) -> None:
    if build.request.cuda_graphs is None:
        return
    arm, tokens = cuda_graph_arm(build.request.cuda_graphs)
    reason = f"--cuda-graphs {build.request.cuda_graphs}: an arm of issue #53's measurement"
    kwargs, path = engine.kwargs, f"{engine.path}.engine_kwargs"
    if arm == "decode-only" and tokens is None:
        tokens = kwargs.get("max_num_seqs")  # as the stage field renders it
    if tokens is not None:
        for name in CAPTURE_ARGS:
            if name in kwargs:
                build.add(f"{path}.{name}", kwargs.pop(name), None, reason)
    capture = {} if tokens is None else {"max_cudagraph_capture_size": tokens}
    if arm == "vllm-default":
        if "compilation_config" in kwargs:
            build.add(f"{path}.compilation_config", kwargs.pop("compilation_config"), None, reason)
        if capture:
            build.set(kwargs, "compilation_config", capture, f"{path}.compilation_config", reason)
        return
    if arm == "decode-only":
        build.set(kwargs, "compilation_config", decode_only_graphs(tokens), f"{path}.compilation_config", reason)
        return
    stage = kwargs.get("compilation_config", {})
    graphs = {"mode": 0, **stage, "cudagraph_mode": "FULL_AND_PIECEWISE", **capture}
    build.set(kwargs, "compilation_config", graphs, f"{path}.compilation_config", reason)
    _runtime_env_var(build, engine, "VLLM_USE_BREAKABLE_CUDAGRAPH", "1", reason)


def _oracle_usage(build: _Build, engine: _Engine) -> None:
    """A real checkpoint: every answer reports the prompt tokens its engine did not compute (usage.prompt_tokens_
    details.cached_tokens, vllm/entrypoints/openai/chat_completion/serving.py), which the oracle accounts."""
    if build.request.real_weights:
        build.set(
            engine.kwargs,
            "enable_prompt_tokens_details",
            True,
            f"{engine.path}.engine_kwargs.enable_prompt_tokens_details",
            "the oracle reads each answer's cached prompt tokens; a field of the answer, no computation changes",
        )


def _decode_weights(build: _Build, engine: _Engine) -> None:
    """--decode-weights: the negative control. The decode engine loads another checkpoint, so the KV cache it
    receives was computed by other weights than its own: the oracle must fail. vLLM's handshake hashes the model's
    path (compute_nixl_compatibility_hash, nixl/metadata.py) and refuses the transfer unless told not to check."""
    if build.request.decode_weights is None or not engine.path.endswith("decode_config"):
        return
    reason = "--decode-weights: a negative control (another checkpoint for the decode engine); the oracle must fail"
    build.set(
        engine.llm["model_loading_config"],
        "model_source",
        str(build.request.decode_weights),
        f"{engine.path}.model_loading_config.model_source",
        reason,
    )
    build.set(
        engine.kwargs["kv_transfer_config"]["kv_connector_extra_config"],
        "enforce_handshake_compat",
        False,
        f"{engine.path}.engine_kwargs.kv_transfer_config.kv_connector_extra_config.enforce_handshake_compat",
        f"{reason}: the KV cache must cross despite the other model path (nixl/base_worker.py enforce_compat_hash)",
    )


def _autoscaling_cap(build: _Build, engine: _Engine) -> None:
    """Spare GPUs (beyond every side's minimum) go to the sides in order; the rest is capped."""
    scaling = engine.llm["deployment_config"].get("autoscaling_config")
    if not scaling:
        return
    most = scaling["min_replicas"] + max(build.spare, 0) // build.tp  # engines sharing a GPU leave none spare
    build.spare -= (min(scaling["max_replicas"], most) - scaling["min_replicas"]) * build.tp
    build.set(
        scaling,
        "max_replicas",
        min(scaling["max_replicas"], most),
        f"{engine.path}.deployment_config.autoscaling_config.max_replicas",
        f"this host has {build.gpus} GPUs",
    )


def _per_worker_gpus(build: _Build) -> None:
    """vLLM's Ray executor asks Ray for this much GPU per worker (vllm/envs.py, default 1.0). Ray Serve LLM sets
    it in the replica's runtime env from the bundle, but the engine core process that creates the workers did
    not see it (seen on an H200: "{'GPU': 1.0} cannot fit into any bundles")."""
    if build.per_gpu > 1:
        build.env["VLLM_RAY_PER_WORKER_GPUS"] = str(round(1 / build.per_gpu, 3))
        build.add(
            "worker env VLLM_RAY_PER_WORKER_GPUS",
            None,
            build.env["VLLM_RAY_PER_WORKER_GPUS"],
            "engines sharing a GPU: each engine worker asks Ray for its fraction",
        )


def _offline_hub(build: _Build) -> None:
    for name in OFFLINE:
        build.env[name] = "1"
        build.add(
            f"worker env {name}",
            None,
            "1",
            "the host has no network: never ask the Hugging Face hub (the model folder is local)",
        )


def _pod_environment(build: _Build) -> None:
    """The worker pod template's env, with the pod's IP (a fieldRef) as the host's loopback, and how requests reach
    the replicas (the head's and the workers' alike: one Ray node here)."""
    serving = build.serving
    for item in [
        *worker_environment(efa=build.request.host.has_efa),
        *serve_ingress_environment(serving.serve_ingress),
    ]:
        if "value" in item:
            build.env[item["name"]] = item["value"]
        else:
            build.env[item["name"]] = NODE_IP
            build.add(
                f"worker env {item['name']}",
                "status.podIP",
                NODE_IP,
                "one host: Ray's node IP (loopback) instead of the pod IP",
            )


def _libfabric_environment(build: _Build) -> None:
    """--nixl-backend LIBFABRIC on a host without EFA: libfabric's tcp provider, from the carried libfabric
    (serving_lab/pins/libfabric.debs: the host's own lacks FABRIC_1.7, which NIXL's plugin needs). FI_TCP_IFACE is left
    unset: the provider lists the host's IPv4 interfaces before loopback and NIXL takes the first (eth0 on the H200
    host); on loopback (FI_TCP_IFACE=lo) NIXL's rail failed there ("socket listen failed"). --engine-env sets it."""
    transport = build.request.transport
    if not transport.keeps_libfabric(build.request.host):
        return
    efa = {item["name"]: item.get("value") for item in worker_environment(efa=True)}
    build.env["FI_PROVIDER"] = "tcp"
    build.add(
        "worker env FI_PROVIDER",
        efa.get("FI_PROVIDER"),
        "tcp",
        "no EFA device on this host: libfabric's tcp provider (the stage's EFA nodes set efa)",
    )
    if transport.libfabric:
        lib = str(Path(transport.libfabric) / "lib")
        build.env["LD_LIBRARY_PATH"] = lib
        build.add(
            "worker env LD_LIBRARY_PATH",
            None,
            lib,
            "the carried libfabric 2.1 (--libfabric: serving_lab/pins/libfabric.debs or libfabric-cuda.build), put "
            "before the host's own path: the host's "
            "libfabric 1.17 lacks FABRIC_1.7, so NIXL's LIBFABRIC plugin would not load",
        )


def _ucx_cuda_ipc_reads(build: _Build) -> None:
    """Both engines on one host: the decode engine reads the prefill engine's GPU memory (NIXL READ), and UCX turns
    cuda_ipc reads off on a GPU without NVLink (ENABLE_GET_ZCOPY=auto, src/uct/cuda/cuda_ipc/cuda_ipc_iface.c)."""
    if not build.request.transport.runs_ucx(build.request.host):
        return
    build.env[UCX_CUDA_IPC_READS] = "y"
    build.add(
        f"worker env {UCX_CUDA_IPC_READS}",
        None,
        "y",
        "both engines on one host: UCX reads the other engine's GPU memory through CUDA IPC, where without it "
        "(no NVLink) it emulates the reads over TCP (0.5 against 80-105 GiB/s on an H200: "
        "evidence/2026-12-02-h200-cuda-ipc/)",
    )


def _other_serve_path(build: _Build) -> None:
    """--serve-ingress and --stream-batching-ms: Serve's other settings, measured against the stage's on one host."""
    for name in ("serve_ingress", "stream_batching_ms"):
        stage, rehearsed = getattr(build.cfg.serving, name), getattr(build.serving, name)
        if rehearsed != stage:
            build.add(f"serving.{name}", stage, rehearsed, f"--{name.replace('_', '-')}")


def _haproxy_connections(build: _Build) -> None:
    """HAProxy refuses to start when the open files it asks for exceed the hard limit (the H200 host's is 20,000;
    an EKS node's is higher: charts/serve_ingress.py). Where Serve's HAProxy ingress is on, whether by
    --serve-ingress or --engine-env, and no connection limit is given, it is cut to what fits here."""
    limit = build.request.host.open_files
    if build.env.get("RAY_SERVE_ENABLE_HA_PROXY") != "1" or "RAY_SERVE_HAPROXY_MAXCONN" in build.env:
        return
    if limit is None or haproxy_maxconn(limit) >= SERVE_DEFAULT_MAXCONN:
        return
    maxconn = haproxy_maxconn(limit)
    build.env["RAY_SERVE_HAPROXY_MAXCONN"] = str(maxconn)
    build.add(
        "worker env RAY_SERVE_HAPROXY_MAXCONN",
        None,
        str(maxconn),
        f"this host allows {limit} open files; HAProxy's default {SERVE_DEFAULT_MAXCONN} connections ask for "
        f"{haproxy_descriptors(SERVE_DEFAULT_MAXCONN)} and one per backend server",
    )


def _engine_env(build: _Build) -> None:
    for name, value in build.request.transport.engine_env:
        before = build.env.get(name)
        build.env[name] = value
        build.add(f"worker env {name}", before, value, "--engine-env")


PLAN_OVERRIDES = (_other_mode, _other_serve_path)
ENGINE_OVERRIDES = (
    _local_model_folder,
    _full_attention_stand_in,
    _dummy_weights,
    _sm90_gdn_backend,
    _shared_gpu_placement,
    _shared_gpu_memory,
    _emulated_memory_budget,
    _emulated_batch_defaults,
    _ucx_without_efa,
    _kv_buffer_device,
    _tcpstore_port,
    _nixl_exporter,
    _otlp_traces,
    _cuda_graph_arm,
    _oracle_usage,
    _decode_weights,
    _autoscaling_cap,
)
ENV_OVERRIDES = (
    _per_worker_gpus,
    _offline_hub,
    _pod_environment,
    _libfabric_environment,
    _ucx_cuda_ipc_reads,
    _engine_env,
    _haproxy_connections,
)


def plan(cfg: StageConfig, request: PlanRequest) -> Plan:
    """The serve config and engine environment for one rehearsal of `cfg` as `request` asks. With `share_gpus`, a
    host with fewer GPUs than the stage's engines runs them side by side on its GPUs. With `emulate_node`, each
    engine gets the memory budget of the stage's GPU node (its fraction of the node's GPU, scaled onto the
    host's) and vLLM's batch defaults for that GPU; the speed stays the host's."""
    build = _start(cfg, request)
    for override in PLAN_OVERRIDES:
        override(build)
    for index, (path, llm) in enumerate(build.configs):
        engine = _Engine(index, path, llm)
        for engine_override in ENGINE_OVERRIDES:
            engine_override(build, engine)
    for override in ENV_OVERRIDES:
        override(build)
    return Plan(
        stage=cfg.stage,
        mode=request.mode,
        serve_config=build.serve_config,
        env=build.env,
        num_gpus=build.gpus,
        engines=build.low,
        overrides=build.overrides,
        label=build.emulation.label if build.emulation else "",
        kv_profiles=build.kv_profiles,
        serving=build.serving,
    )
