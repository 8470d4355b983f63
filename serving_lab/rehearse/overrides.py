"""The rehearsal plan: the stage's own serveConfigV2 with only the overrides one host needs.

Everything starts from `charts.serve_config.build_serve_config` (the code that renders the chart's
`serveConfigV2`) and `charts.ray_pods.worker_environment` (the worker pod template's `env`). Each
change is an `Override` with the path it touches, the value before and after, and why; the plan is
printed before anything starts and written beside the results, so a reader sees exactly how the
rehearsal differs from what EKS would run. Nothing else may differ (tested against dev and prod).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from charts.ray_pods import worker_environment
from charts.serve_config import build_serve_config
from config.engine_args import is_gdn_model
from config.instance_types import INSTANCE_TYPES
from config.schema import Replicas, StageConfig

from .host import NODE_IP, Host

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
    serve_config: dict[str, Any]
    env: dict[str, str]
    num_gpus: int
    engines: int = 0  # GPUs the stage's engines ask for at their fewest (more than num_gpus when shared)
    overrides: list[Override] = field(default_factory=list)
    # With emulate_node: what the results measure, e.g. "L4 memory budget on an H200: memory emulated, speed
    # is the H200's" (printed, in plan-<mode>.json and in the benchmark results' note); "" otherwise.
    label: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "mode": self.mode,
            "num_gpus": self.num_gpus,
            "engines": self.engines,
            **({"label": self.label} if self.label else {}),
            "env": self.env,
            "overrides": [asdict(o) for o in self.overrides],
            "serve_config": self.serve_config,
        }


def _show(value: Any) -> str:
    return "(unset)" if value is _UNSET else repr(value)


_UNSET = object()


def _llm_configs(serve_config: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
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
    low = replicas.replicas if replicas.replicas is not None else max(replicas.min_replicas, 1)
    return low * tensor_parallel, replicas.most * tensor_parallel


# vLLM 0.26's Ray executor picks each engine's torch.distributed TCPStore port from VLLM_DP_MASTER_PORT + 100
# (vllm/v1/executor/ray_executor_v2.py `_select_tcpstore_port`; the env default 0 makes it port 100 for
# every engine: vllm/envs.py VLLM_DP_MASTER_PORT, read by vllm/config/parallel.py). In a pod each engine has
# its own network namespace; on one host the prefill and decode engines start together, both probe port 100
# and one dies with EADDRINUSE (seen on an H200 pair: Serve restarted it, ~110 s lost). Each engine config
# gets its own base here, 50 apart: the executor probes a window of 32 ports from base + 100 (`window = 32`
# in `_select_tcpstore_port`), so the windows never overlap (seen: 29600 and 29650).
TCPSTORE_BASE = 29500
TCPSTORE_STRIDE = 50


# With --share-gpus, each engine's KV cache gets a fixed size instead of vLLM's profile of free memory:
# engines starting side by side on one GPU would otherwise count each other's memory as their own.
SHARED_KV_CACHE_FRACTION = 0.15


# vLLM 0.26 picks max_num_seqs and max_num_batched_tokens from the GPU the engine runs on when they are unset:
# vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults (the figures: "default_max_num_seqs",
# "default_max_num_batched_tokens") applied by EngineArgs._set_default_max_num_seqs_and_batched_tokens_args.
# Ray Serve LLM builds the engine config for the OpenAI server (`create_engine_config(usage_context=
# UsageContext.OPENAI_API_SERVER)`, ray/llm/_internal/serve/engines/vllm/vllm_engine.py): 1024 sequences and
# 8192 batched tokens on a device of at least 70 GiB whose name has no "a100" (H100, H200; the H200 runs
# logged "max_num_batched_tokens=8192"), else 256 and 2048 (L4, A10G, L40S, A100).
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
    if spec is None or spec.gpu_memory_mib <= 0:
        raise PlanError(
            f"--emulate-node: config/instance_types.py: {instance_type}: the memory of its "
            f"{(spec.gpu_model if spec else '') or 'GPU'} is not known (gpu_memory_mib 0); add the "
            f"driver's figure (nvidia-smi --query-gpu=memory.total) to emulate it"
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


def plan(
    cfg: StageConfig,
    *,
    mode: str,
    host: Host,
    model_dir: Path,
    real_weights: bool,
    gpu_limit: int | None = None,
    share_gpus: bool = False,
    emulate_node: bool = False,
    kv_cache_bytes: int | None = None,
) -> Plan:
    """The serve config and engine environment for one rehearsal of `cfg` in `mode`. With
    `share_gpus`, a host with fewer GPUs than the stage's engines runs them side by side on its GPUs. With
    `emulate_node`, each engine gets the memory budget of the stage's GPU node (its fraction of the node's
    GPU, scaled onto the host's) and vLLM's batch defaults for that GPU; the speed stays the host's."""
    if mode not in MODES:
        raise PlanError(f"--mode: {mode!r} (allowed: {', '.join(MODES)})")
    serving = cfg.serving if cfg.serving.mode == mode else cfg.serving.model_copy(update={"mode": mode})
    serve_config = copy.deepcopy(build_serve_config(serving))
    overrides: list[Override] = []
    if mode != cfg.serving.mode:
        overrides.append(
            Override(
                "serving.mode", cfg.serving.mode, mode, "the other mode on the same GPUs, for the benchmark comparison"
            )
        )
    gpus = len(host.gpus) if gpu_limit is None else min(gpu_limit, len(host.gpus))
    tp = serving.engine.tensor_parallel_size
    sides = [serving.prefill, serving.decode]
    low = sum(_gpus_needed(r, tp)[0] for r in sides)
    per_gpu = 1
    if low > gpus:
        if not share_gpus:
            raise PlanError(
                f"config/{cfg.stage}.yaml: serving: needs at least {low} GPUs "
                f"(prefill + decode x tensor_parallel_size), this host has {gpus} "
                f"(--share-gpus runs the engines side by side on fewer GPUs)"
            )
        per_gpu = -(-low // gpus)
    sm90 = any(g.major == 9 for g in host.gpus)
    spare = gpus - low
    configs = list(_llm_configs(serve_config))
    emulation = _emulation(cfg, host, gpus) if emulate_node else None
    if emulation:
        budgets = [emulation.utilization(llm["engine_kwargs"]["gpu_memory_utilization"]) for _, llm in configs]
        if per_gpu * max(budgets) > 1:
            raise PlanError(
                f"--emulate-node: {per_gpu} engine(s) on each GPU x {max(budgets):g} of the host's "
                f"{emulation.host_mib} MiB = {per_gpu * max(budgets):.4g} of it: the "
                f"{emulation.gpu_model} budgets of {emulation.instance_type} do not fit this host's "
                f"{_short(emulation.host_gpu)}"
            )
    for index, (path, llm) in enumerate(configs):
        loading, engine = llm["model_loading_config"], llm["engine_kwargs"]
        _set(
            overrides,
            loading,
            "model_source",
            str(model_dir),
            f"{path}.model_loading_config.model_source",
            "no network on the host: a local model folder"
            + ("" if real_weights else " (config and tokenizer of the real model)"),
        )
        if not real_weights:
            _set(
                overrides,
                engine,
                "load_format",
                "dummy",
                f"{path}.engine_kwargs.load_format",
                "no weights on the host: random weights of the real architecture (compute and memory "
                "are the real model's, the text is noise)",
            )
            _set(
                overrides,
                engine,
                "language_model_only",
                True,
                f"{path}.engine_kwargs.language_model_only",
                "the model folder has no image processor: skip the vision tower (the checks and the "
                "benchmark send text only)",
            )
        if sm90 and is_gdn_model(cfg.serving.model.source) and "gdn_prefill_backend" not in engine:
            _set(
                overrides,
                engine,
                "gdn_prefill_backend",
                "triton",
                f"{path}.engine_kwargs.gdn_prefill_backend",
                "compute capability 9.x host: FlashInfer's SM90 GDN prefill kernel is unavailable "
                "(EngineDeadError on the first request); set serving.engine.gdn_prefill_backend for SM90 nodes",
            )
        if per_gpu > 1:
            # A fraction of a GPU per engine worker: Ray packs the engines onto one GPU and Ray Serve LLM
            # tells vLLM (VLLM_RAY_PER_WORKER_GPUS, ray/llm/_internal/serve/engines/vllm/vllm_models.py).
            _set(
                overrides,
                llm,
                "placement_group_config",
                {"bundle_per_worker": {"GPU": round(1 / per_gpu, 3)}},
                f"{path}.placement_group_config",
                f"{low} engines on {gpus} GPU(s): {per_gpu} engines share each GPU's compute",
            )
            if emulation is None:
                share = round(int(engine["gpu_memory_utilization"] / per_gpu * 100) / 100 - 0.03, 2)
                _set(
                    overrides,
                    engine,
                    "gpu_memory_utilization",
                    share,
                    f"{path}.engine_kwargs.gpu_memory_utilization",
                    f"{per_gpu} engines share each GPU: each asks for its part of the memory",
                )
                _set(
                    overrides,
                    engine,
                    "kv_cache_memory_bytes",
                    int(host.gpus[0].memory_mib * 2**20 * SHARED_KV_CACHE_FRACTION),
                    f"{path}.engine_kwargs.kv_cache_memory_bytes",
                    "a fixed KV cache: engines starting side by side on one GPU cannot profile its free memory",
                )
            elif "kv_cache_memory_bytes" not in engine:
                # Engines sharing a GPU cannot profile their emulated budgets side by side: each counts the other's
                # weights loading meanwhile as its own memory (seen on an H200: "Available KV cache memory: -16.87
                # GiB", then vLLM's "Error in memory profiling ... other processes sharing the same container"),
                # so the KV cache comes from one engine profiled alone on the same budget (--kv-cache-bytes).
                if kv_cache_bytes is None:
                    raise PlanError(
                        "--share-gpus --emulate-node: engines sharing a GPU cannot profile their budgets "
                        "side by side (each counts the other's weights as its own): give --kv-cache-bytes "
                        "N, the KV cache one engine alone finds on this budget (vLLM prints it at start-up: "
                        "'--kv-cache-memory=N' to fit into requested memory; docs/REHEARSAL.md)"
                    )
                _set(
                    overrides,
                    engine,
                    "kv_cache_memory_bytes",
                    kv_cache_bytes,
                    f"{path}.engine_kwargs.kv_cache_memory_bytes",
                    "engines sharing a GPU on an emulated budget: the KV cache one engine alone found on it "
                    "(--kv-cache-bytes), since side by side they cannot profile it",
                )
        if emulation:
            stage_util = engine["gpu_memory_utilization"]
            _set(
                overrides,
                engine,
                "gpu_memory_utilization",
                emulation.utilization(stage_util),
                f"{path}.engine_kwargs.gpu_memory_utilization",
                f"the {emulation.gpu_model} budget of {emulation.instance_type}: {stage_util:g} x "
                f"{emulation.target_mib} MiB of the host's {emulation.host_mib} MiB",
            )
            target = _batch_settings(engine, vllm_batch_defaults(emulation.target_mib, emulation.gpu_model))
            native = _batch_settings(engine, vllm_batch_defaults(emulation.host_mib, emulation.host_gpu))
            for key, value, host_value in zip(("max_num_seqs", "max_num_batched_tokens"), target, native):
                if key in engine:
                    continue  # the stage's own setting is what EKS runs
                _set(
                    overrides,
                    engine,
                    key,
                    value,
                    f"{path}.engine_kwargs.{key}",
                    f"vLLM 0.26's default for the OpenAI server on the {emulation.gpu_model} of "
                    f"{emulation.instance_type} ({emulation.size_class}: vllm/engine/arg_utils.py "
                    f"EngineArgs.get_batch_defaults); on the host's {_short(emulation.host_gpu)} it would take "
                    f"{host_value}",
                )
        kv = engine.get("kv_transfer_config")
        if kv is not None and not host.has_efa:
            extra = kv["kv_connector_extra_config"]
            _set(
                overrides,
                extra,
                "backends",
                ["UCX"],
                f"{path}.engine_kwargs.kv_transfer_config.kv_connector_extra_config.backends",
                "no EFA device on this host: NIXL over UCX (shared memory / TCP on one host); the EFA path "
                "is not exercised",
            )
        if len(configs) > 1:
            port = str(TCPSTORE_BASE + TCPSTORE_STRIDE * index)
            reason = (
                "engines side by side on one host: each its own torch.distributed port range (in a pod each "
                "has its own network namespace); without it both take port 100 and one fails with EADDRINUSE"
            )
            if "env_vars" in llm.get("runtime_env", {}):
                _set(
                    overrides,
                    llm["runtime_env"]["env_vars"],
                    "VLLM_DP_MASTER_PORT",
                    port,
                    f"{path}.runtime_env.env_vars.VLLM_DP_MASTER_PORT",
                    reason,
                )
            elif "runtime_env" in llm:
                _set(
                    overrides,
                    llm["runtime_env"],
                    "env_vars",
                    {"VLLM_DP_MASTER_PORT": port},
                    f"{path}.runtime_env.env_vars",
                    reason,
                )
            else:
                _set(
                    overrides,
                    llm,
                    "runtime_env",
                    {"env_vars": {"VLLM_DP_MASTER_PORT": port}},
                    f"{path}.runtime_env",
                    reason,
                )
        scaling = llm["deployment_config"].get("autoscaling_config")
        if scaling:
            # Spare GPUs (beyond every side's minimum) go to the sides in order; the rest is capped.
            most = scaling["min_replicas"] + max(spare, 0) // tp  # engines sharing a GPU leave none spare
            spare -= (min(scaling["max_replicas"], most) - scaling["min_replicas"]) * tp
            _set(
                overrides,
                scaling,
                "max_replicas",
                min(scaling["max_replicas"], most),
                f"{path}.deployment_config.autoscaling_config.max_replicas",
                f"this host has {gpus} GPUs",
            )
    env: dict[str, str] = {}
    if per_gpu > 1:
        # vLLM's Ray executor asks Ray for this much GPU per worker (vllm/envs.py, default 1.0). Ray Serve
        # LLM sets it in the replica's runtime env from the bundle, but the engine core process that
        # creates the workers did not see it (seen on an H200: "{'GPU': 1.0} cannot fit into any bundles").
        env["VLLM_RAY_PER_WORKER_GPUS"] = str(round(1 / per_gpu, 3))
        overrides.append(
            Override(
                "worker env VLLM_RAY_PER_WORKER_GPUS",
                None,
                env["VLLM_RAY_PER_WORKER_GPUS"],
                "engines sharing a GPU: each engine worker asks Ray for its fraction",
            )
        )
    for name in OFFLINE:
        env[name] = "1"
        overrides.append(
            Override(
                f"worker env {name}",
                None,
                "1",
                "the host has no network: never ask the Hugging Face hub (the model folder is local)",
            )
        )
    for item in worker_environment(efa=host.has_efa):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = NODE_IP
            overrides.append(
                Override(
                    f"worker env {item['name']}",
                    "status.podIP",
                    NODE_IP,
                    "one host: Ray's node IP (loopback) instead of the pod IP",
                )
            )
    return Plan(
        stage=cfg.stage,
        mode=mode,
        serve_config=serve_config,
        env=env,
        num_gpus=gpus,
        engines=low,
        overrides=overrides,
        label=emulation.label if emulation else "",
    )
