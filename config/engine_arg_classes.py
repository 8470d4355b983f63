"""The classes of vLLM's engine arguments: every recorded EngineArgs field (config/vllm_engine_args.json) is
reserved, opt-in or allowed, with the check each allowed one gets. A table: config/engine_args.py checks an
extra_args value against it, the rules of config/rules/serving_engine.py read it, and it imports no rule.

Allowlists where a denylist would leak: a field vLLM adds later is refused until someone classifies it."""

from __future__ import annotations

import re
from typing import Any

# --- 12. vLLM engine arguments (serving.engine.extra_args) -----------------------------------------------
# serving.engine's typed fields that reach vLLM as the argument of their name, in Engine's order (config/schema.py
# vllm_kwargs renders them): listed here, which the schema imports, so each is reserved where it is rendered.
TYPED_ENGINE_ARGS = (
    "max_model_len", "dtype", "gpu_memory_utilization", "enforce_eager", "tensor_parallel_size", "max_num_seqs",
    "max_num_batched_tokens", "enable_prefix_caching", "gdn_prefill_backend",
)  # fmt: skip
# Every field of the recorded EngineArgs (config/vllm_engine_args.json) in exactly one class: reserved, opt-in
# or allowed (with its check, ENGINE_ARG_CHECKS, 12a); a field in no class is refused: an allowlist.
# Why: docs/DECISIONS.md, "Engine arguments by what they mean".
_RESERVED_BY_REASON: dict[str, tuple[str, ...]] = {
    "set by the project (serving.engine's own fields, serving.model, or the serve config the chart writes)": (
        "model",
        "served_model_name",
        "tokenizer",
        *TYPED_ENGINE_ARGS,
        "distributed_executor_backend",
    ),
    "set by the project: an engine here spans tensor_parallel_size GPUs of one node (the worker pods' GPU "
    "requests and ops rehearse place it so); layouts over several engines or nodes (pipeline, data, context "
    "parallel) are not supported yet, though the capacity rule counts them (config/derived.py gpus_per_replica)": (
        "prefill_context_parallel_size",
        "data_parallel_size",
        "data_parallel_size_local",
        "data_parallel_rank",
        "data_parallel_start_rank",
        "data_parallel_address",
        "data_parallel_rpc_port",
        "data_parallel_backend",
        "data_parallel_external_lb",
        "data_parallel_hybrid_lb",
        "data_parallel_multi_port_external_lb",
        "enable_elastic_ep",
        "nnodes",
        "node_rank",
        "master_addr",
        "master_port",
        "device_ids",
        "_api_process_count",
        "_api_process_rank",
    ),
    "not supported: with PD, vLLM 0.26's NIXL connector refuses pipeline parallel on the decode engine and on a "
    "hybrid model such as Qwen3.5 (GDN layers), and colocated no stage places an engine over nodes yet "
    '(docs/DECISIONS.md, "Pipeline parallel: refused")': ("pipeline_parallel_size",),
    "set by the project: the KV connector between prefill and decode (NIXL over serving.kv_backend); this "
    "argument replaces or adds a connector": (
        "kv_transfer_config",
        "kv_offloading_backend",
        "kv_offloading_size",
        "ec_transfer_config",
    ),
    "imports and runs code named by the value (a class, a plugin, a module path)": (
        "worker_cls",
        "worker_extension_cls",
        "scheduler_cls",
        "logits_processors",
        "io_processor_plugin",
        "reasoning_parser_plugin",
        "model_class_overrides",
        "additional_config",
    ),
    "replaces the weights, the model's configuration or its quantization, or loads a second model": (
        "model_weights",
        "hf_config_path",
        "config_format",
        "hf_overrides",
        "override_attention_dtype",
        "override_generation_config",
        "model_loader_extra_config",
        "quantization_config",
        "speculative_config",
        "spec_model",
        "spec_method",
        "spec_tokens",
        "weight_transfer_config",
        "default_mm_loras",
        "mm_processor_kwargs",
        "diffusion_config",
    ),
    "sends data out of the pod (traces, KV cache events) to an endpoint it names": (
        "otlp_traces_endpoint",
        "collect_detailed_traces",
        "kv_events_config",
    ),
    "opens the node's file system or fetches from the network (a directory, a path, media URLs)": (
        "download_dir",
        "allowed_local_media_path",
        "allowed_media_domains",
        "mm_encoder_fp8_scale_path",
        "mm_encoder_fp8_scale_save_path",
        "profiler_config",
        "compilation_config",
    ),
    "carries a secret: the token comes from serving.hf_token_secret (Secrets Manager, mounted as a file)": (
        "hf_token",
    ),
    "decides which files of serving.model.source download and load: a pattern can leave out the safetensors "
    "and load another format": ("ignore_patterns",),
    # Tuning by name, but each turns off a part the stack relies on, and nothing fails at start.
    "turns off the engine's stats, which the TtftP99 alarm and the dashboard read: with no data the alarm never "
    "fires and verify still passes (vllm/v1/engine/async_llm.py: no stat loggers without log_stats)": (
        "disable_log_stats",
    ),
    "skips the tokenizer, which the OpenAI chat and completions endpoints need to read text "
    "(vllm/entrypoints/openai/chat_completion/serving.py: 'Tokenizer not available when skip_tokenizer_init=True'; "
    "tokens_only sets it, vllm/engine/arg_utils.py)": ("skip_tokenizer_init", "tokens_only"),
    "skips the language model, so the engine generates no text (vllm/config/multimodal.py, mm_encoder_only: "
    "'skips the language component of the model')": ("mm_encoder_only",),
    # Memory no rule here can count: refused, where the counted form exists it is named.
    "sizes memory past vLLM's memory profile, so the fit check cannot count it: a fixed block count "
    "(vllm/config/cache.py: 'overrides the profiled num_gpu_blocks ... Used for testing preemption') or an "
    "unprofiled vision encoder (vllm/config/multimodal.py, skip_mm_profiling: 'shifts the responsibility to users "
    "for estimating the peak memory'); a fixed KV size is kv_cache_memory_bytes, which is counted": (
        "num_gpu_blocks_override",
        "skip_mm_profiling",
    ),
    "moves whole layers to the CPU by a count of layers (the prefetch offloader, vllm/config/offload.py), which no "
    "rule here turns into GiB of the worker pod's memory; cpu_offload_gb, in GiB, is counted": (
        "offload_backend",
        "offload_group_size",
        "offload_num_in_group",
        "offload_params",
        "offload_prefetch_step",
    ),
    "turns on LoRA slots no adapter can fill (adapters reach the engine only through Ray Serve's lora_config, no "
    "stage setting), with GPU memory the fit check does not count": (
        "enable_lora",
        "max_loras",
        "max_lora_rank",
        "max_cpu_loras",
        "lora_dtype",
        "lora_target_modules",
        "fully_sharded_loras",
        "enable_mixed_moe_lora_format",
        "enable_moe_shared_loras",
        "enable_tower_connector_lora",
        "specialize_active_lora",
    ),
}
_OPT_IN_BY_REASON: dict[str, tuple[str, ...]] = {
    "runs the Python code of the model's repository (and code_revision picks which)": (
        "trust_remote_code",
        "code_revision",
    ),
    "lets clients send tensors the server deserializes (prompt or multimodal embeddings)": (
        "enable_prompt_embeds",
        "enable_mm_embeds",
    ),
    "lets the engine drop and reload its weights on request (sleep mode)": ("enable_sleep_mode",),
    "starts the Ray workers under Nsight Systems, writing profiles to the node": ("ray_workers_use_nsight",),
}
ENGINE_ARGS_RESERVED: dict[str, str] = {name: why for why, names in _RESERVED_BY_REASON.items() for name in names}
ENGINE_ARGS_OPT_IN: dict[str, str] = {name: why for why, names in _OPT_IN_BY_REASON.items() for name in names}
# --- 12a. the allowed arguments, each with the check it gets ----------------------------------------------
# IDENTITY_ARGS: what decides which weights, configuration and tokenizer load, or how the KV cache is laid out.
# NIXL's compatibility hash does not cover them all, so both PD roles run one value of each (role_identity).
# Why: docs/DECISIONS.md, "Engine arguments by what they mean".
IDENTITY_ARGS: dict[str, str] = {
    "dtype": "the dtype the weights are cast to and the KV cache is kept in",
    "revision": "which commit of serving.model.source's weights, config and chat template load",
    "trust_remote_code": "whether the repository's own config, tokenizer and model classes run",
    "code_revision": "which commit of the repository's own model code runs (with trust_remote_code)",
    "tokenizer_revision": "which commit of the tokenizer and its chat template load",
    "tokenizer_mode": "which tokenizer implementation turns text into token ids",
    "quantization": "the format the weights are held and multiplied in",
    "load_format": "which files of the repository are read",
    "model_impl": "which model code (vLLM's or Transformers') runs the weights",
    "language_model_only": "whether the vision tower loads, so which inputs the engine takes",
    "generation_config": "the sampling defaults a request gets",
    "kv_cache_dtype": "the dtype the KV cache is stored in",
    "calculate_kv_scales": "the scales an fp8 KV cache is written with",
    "kv_sharing_fast_prefill": "which layers keep the prompt's KV cache",
    "disable_sliding_window": "whether sliding-window layers keep the whole context's KV cache",
    "disable_hybrid_kv_cache_manager": "how a hybrid model's KV cache is grouped into blocks",
    "mamba_cache_dtype": "the dtype of the recurrent state (Gated DeltaNet, Mamba) moved with the KV cache",
    "mamba_ssm_cache_dtype": "the dtype of the SSM state moved with the KV cache",
    "mamba_block_size": "how the recurrent state is cut into blocks",
    "mamba_cache_mode": "which recurrent states are kept per block",
}
# A revision is pinned by a full commit id only (40 lower-case hex digits): branches and tags move, and
# refs/pr/N is anyone's Hub pull request. NIXL's hash covers the dtypes; the rest it does not see at all.
# Why: docs/DECISIONS.md, "Engine arguments by what they mean".
NIXL_SILENT = "which NIXL's handshake does not compare: the two would serve one request from different models"
NIXL_CHECKS = {
    name: "which NIXL's handshake refuses only when the first request arrives" for name in ("dtype", "kv_cache_dtype")
}
COMMIT_ID = re.compile(r"[0-9a-f]{40}")
PINNED_REVISIONS = ("revision", "code_revision", "tokenizer_revision")
# COUNTED_ARGS: what changes the memory one engine holds, or how it spans its GPUs, each fed into a rule.
COUNTED_ARGS: dict[str, str] = {
    "kv_cache_memory_bytes": "a fixed KV cache per GPU in place of gpu_memory_utilization's share: counted against "
    "the GPU's memory, one max_model_len sequence and the GpuMemory alarm (engine_memory)",
    "cpu_offload_gb": "weights held in the worker pod's memory, per GPU: counted against "
    "serving.worker_resources' memory limit (engine_memory)",
    "mm_processor_cache_gb": "the multimodal processor cache, in the pod's memory once per process of an engine: "
    "counted with cpu_offload_gb (engine_memory)",
    "mm_processor_cache_type": "shm puts the multimodal processor cache in /dev/shm: counted against "
    "serving.worker_resources.shm_gib (engine_memory)",
    "watermark": "keeps a share of the KV cache free of requests: counted against one max_model_len sequence "
    "(engine_memory)",
    "mm_ipc_gpu_memory_gb": "carved out of the KV cache's memory: counted against one max_model_len sequence "
    "(engine_memory)",
    "decode_context_parallel_size": "splits the KV cache over an engine's TP ranks: checked against "
    "tensor_parallel_size and the model's heads (parallel_layout)",
}
# The rest tunes speed, scheduling, kernels, loading or the pod's own logs: no rule of the stack reads it, and its
# type (with ENGINE_ARG_VALUES' values for a few) is all that is checked.
FREE_TUNING = frozenset(
    {
        # memory layout, KV cache and offload
        "block_size",
        "cpu_offload_params",
        "kv_cache_dtype_skip_layers",
        "enable_cumem_allocator",
        "prefix_caching_hash_algo",
        "prefix_match_unit",
        "mamba_backend",
        "mamba_cache_philox_rounds",
        "mamba_config",
        "enable_mamba_cache_stochastic_rounding",
        # scheduling and batching
        "async_scheduling",
        "enable_chunked_prefill",
        "long_prefill_token_threshold",
        "max_long_partial_prefills",
        "max_num_partial_prefills",
        "max_num_scheduled_tokens",
        "prefill_schedule_interval",
        "scheduling_policy",
        "scheduler_reserve_full_isl",
        "stream_interval",
        "performance_mode",
        "disable_cascade_attn",
        "shutdown_timeout",
        "distributed_timeout_seconds",
        "cpu_distributed_timeout_seconds",
        # kernels, compilation level, attention
        "attention_backend",
        "attention_config",
        "kernel_config",
        "ir_op_priority",
        "linear_backend",
        "moe_backend",
        "optimization_level",
        "cudagraph_capture_sizes",
        "max_cudagraph_capture_size",
        "enable_flashinfer_autotune",
        "enable_bf16x3_router_gemm",
        "disable_custom_all_reduce",
        "use_fp64_gumbel",
        "enable_dbo",
        "dbo_decode_token_threshold",
        "dbo_prefill_token_threshold",
        "ubatch_size",
        "jit_monitor_mode",
        "jit_monitor_verbose",
        # parallel layout inside the engine's tensor_parallel_size GPUs
        "dcp_comm_backend",
        "dcp_kv_cache_interleave_size",
        "cp_kv_cache_interleave_size",
        "enable_expert_parallel",
        "all2all_backend",
        "enable_eplb",
        "eplb_config",
        "expert_placement_strategy",
        "enable_ep_weight_filter",
        "disable_nccl_for_dp_synchronization",
        "numa_bind",
        "numa_bind_cpus",
        "numa_bind_nodes",
        # quantization of the checkpoint the stage names, and how it is read
        "allow_deprecated_quantization",
        "pt_load_map_location",
        "max_parallel_loading_workers",
        "safetensors_load_strategy",
        "safetensors_prefetch_block_size",
        "safetensors_prefetch_num_threads",
        "use_tqdm_on_load",
        # model behaviour, tokenizer, outputs
        "runner",
        "convert",
        "pooler_config",
        "max_logprobs",
        "logprobs_mode",
        "reasoning_parser",
        "reasoning_config",
        "structured_outputs_config",
        "seed",
        "enable_return_routed_experts",
        # multimodal processing (inputs arrive in requests; fetching them is reserved above)
        "limit_mm_per_prompt",
        "media_io_kwargs",
        "interleave_mm_strings",
        "disable_chunked_mm_input",
        "mm_encoder_tp_mode",
        "mm_encoder_attn_backend",
        "mm_encoder_attn_dtype",
        "mm_encoder_fp8_scale_save_margin",
        "mm_shm_cache_max_object_size_mb",
        "mm_tensor_ipc",
        "video_pruning_rate",
        # metrics and logs inside the pod (what leaves it is the observability stack's choice)
        "aggregate_engine_logging",
        "cudagraph_metrics",
        "enable_layerwise_nvtx_tracing",
        "enable_logging_iteration_details",
        "enable_mfu_metrics",
        "enable_mm_processor_stats",
        "kv_cache_metrics",
        "kv_cache_metrics_sample",
        "show_hidden_metrics_for_version",
        "fail_on_environ_validation",
        "renderer_num_workers",
    }
)
FREE_CHECK = "its type and allowed values only: no rule of the stack depends on it"
# Every argument extra_args may set, with what checks it (tests/config/test_engine_identity.py: the three groups are
# disjoint and cover ENGINE_ARGS_ALLOWED).
ENGINE_ARG_CHECKS: dict[str, str] = {
    **{name: FREE_CHECK for name in FREE_TUNING},
    **{name: f"one value for prefill and decode: it decides {what}" for name, what in IDENTITY_ARGS.items()},
    **COUNTED_ARGS,
}
ENGINE_ARGS_ALLOWED = frozenset(ENGINE_ARG_CHECKS).difference(ENGINE_ARGS_RESERVED, ENGINE_ARGS_OPT_IN)
# Allowed arguments whose string value could name code, a file or a download: only these values.
ENGINE_ARG_VALUES: dict[str, tuple[tuple[str, ...], str]] = {
    # "pt" unpickles torch files, "dummy" serves random weights, "tensorizer" and "runai_streamer" fetch from a
    # URI of their own, "npcache" writes a cache to the node, "sharded_state" / "gguf" / "bitsandbytes" /
    # "mistral" read another checkpoint format than the source's safetensors.
    "load_format": (("auto", "safetensors", "fastsafetensors"), "the safetensors files of serving.model.source"),
    # vLLM's own implementation or the installed Transformers library's; other values are plugins.
    "model_impl": (("auto", "vllm", "transformers"), "vLLM's or the installed Transformers' model code"),
    # any other value is a folder to read the generation config from
    "generation_config": (("auto", "vllm"), "the model's own or vLLM's defaults; a folder is not allowed"),
    # The KV cache dtypes the fit check counts (config/derived.py model_memory_floor: an fp8 cache is half a 16-bit
    # one); the 4-bit and per-head formats it does not count, and fp8_inc / fp8_ds_mla are for other hardware or MLA.
    "kv_cache_dtype": (
        ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"),
        "the KV cache dtypes the fit check counts",
    ),
    # Online quantization of a bf16 checkpoint (fp8 first: a supported tuning), and the methods a
    # pre-quantized checkpoint declares (vLLM reads those from the checkpoint, the argument only confirms it).
    # Other names are methods registered by plugins.
    "quantization": (
        (
            "fp8",
            "ptpc_fp8",
            "fbgemm_fp8",
            "experts_int8",
            "bitsandbytes",
            "awq",
            "awq_marlin",
            "gptq",
            "gptq_marlin",
            "compressed-tensors",
            "modelopt",
            "modelopt_fp4",
            "mxfp4",
            "moe_wna16",
        ),
        "vLLM's built-in quantization methods",
    ),
}
# The string arguments whose value the engine looks up by name in a registry: only the names vLLM 0.26 itself
# registers (a name it does not know fails the engine's start; one that is a path or a module is not a name).
# vllm/reasoning/__init__.py _REASONING_PARSERS_TO_REGISTER: the parsers ReasoningParserManager knows.
_REASONING_PARSERS = (
    "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4", "ernie45", "gemma4", "glm45",
    "glm47", "granite", "holo2", "hunyuan_a13b", "hy_v3", "inkling", "kimi_k2", "mimo", "minimax_m2",
    "minimax_m2_append_think", "minimax_m3", "mistral", "nemotron_v3", "olmo3", "openai_gptoss", "poolside_v1",
    "qwen3", "seed_oss", "step3", "step3p5",
)  # fmt: skip
ENGINE_ARG_VALUES |= {
    # "" is EngineArgs' default: no reasoning parser.
    "reasoning_parser": (
        ("", *_REASONING_PARSERS),
        "the reasoning parsers vLLM 0.26 registers (vllm/reasoning/__init__.py)",
    ),
    # vllm/platforms/cuda.py get_supported_vit_attn_backends: the vision encoder's backends on NVIDIA GPUs (any
    # other AttentionBackendEnum name is another platform's, or CUSTOM, a registered plugin).
    "mm_encoder_attn_backend": (
        ("FLASH_ATTN", "TRITON_ATTN", "TORCH_SDPA", "FLASHINFER"),
        "the vision encoder's attention backends on NVIDIA GPUs (vllm/platforms/cuda.py)",
    ),
    # vllm/config/multimodal.py: mm_encoder_attn_dtype is Literal["fp8"] | None.
    "mm_encoder_attn_dtype": (("fp8",), "the one dtype vllm/config/multimodal.py takes"),
    # vllm/version.py _prev_minor_version_was: only the previous minor version shows hidden metrics.
    "show_hidden_metrics_for_version": (("0.25",), "vLLM 0.26's previous minor version (vllm/version.py)"),
}
# The only free strings an argument takes: a commit id each, which config/rules/serving_engine.py pinned_revisions
# checks; any other string argument takes ENGINE_ARG_VALUES' names or its Literal's choices (an allowlist: a
# `Literal[...] | str` such as tokenizer_mode's free string names a plugin's registration).
FREE_STRINGS = frozenset(PINNED_REVISIONS)


def engine_arg_class(name: str) -> tuple[str, str]:
    """("reserved" | "opt-in" | "allowed" | "unclassified", why) for a recorded EngineArgs field."""
    if name in ENGINE_ARGS_RESERVED:
        return "reserved", ENGINE_ARGS_RESERVED[name]
    if name in ENGINE_ARGS_OPT_IN:
        return "opt-in", ENGINE_ARGS_OPT_IN[name]
    if name in ENGINE_ARGS_ALLOWED:
        return "allowed", ""
    return "unclassified", "not classified for the recorded vLLM (config/py)"


def enables(value: Any) -> bool:
    """Whether an opt-in argument's value turns the behaviour on (False or None leaves it off)."""
    return value is not None and value is not False
