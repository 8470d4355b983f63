"""The Ray Serve application config (`serveConfigV2`), as plain Python: no CDK, no cdk8s.

PD mode runs `ray.serve.llm:build_pd_openai_app` with a prefill and a decode LLMConfig that share the
model id and move the KV cache with NIXL; colocated mode runs `build_openai_app` with one LLMConfig
whose replicas each do both phases on one GPU set: the fair baseline on the same nodes.
Shapes follow Ray 2.58 (`PDServingArgs`, `LLMServingArgs`, `LLMConfig`); the deprecated
`proxy_cls_config` / `proxy_deployment_config` are never emitted.
"""

from __future__ import annotations

import copy
from typing import Any

from config.schema import Replicas, Serving
from config.topology import NIXL_PORT_BASE

from .serve_ingress import stream_batching_ms

APP_NAME = "llm"
PD_IMPORT_PATH = "ray.serve.llm:build_pd_openai_app"
COLOCATED_IMPORT_PATH = "ray.serve.llm:build_openai_app"

# Each side's role: vLLM 0.26 deprecates `kv_both` with NixlConnector and asks for kv_producer on
# prefill and kv_consumer on decode; Ray 2.58 passes kv_transfer_config through unchanged
# (ray/llm/_internal/serve/engines/vllm/kv_transfer/nixl.py rewrites only engine_id).
KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}


def kv_transfer_config(backend: str, engine_id: str) -> dict[str, Any]:
    """NIXL with the backend named explicitly: without `backends`, NIXL picks UCX, which on EFA
    runs at TCP speed. Ray appends the replica's host and port to `engine_id` to make it unique."""
    return {
        "kv_connector": "NixlConnector",
        "kv_role": KV_ROLE[engine_id],
        "engine_id": engine_id,
        "kv_connector_extra_config": {"backends": [backend]},
    }


# An engine over several GPUs keeps its TP ranks on one node or waits: Ray Serve LLM's default is PACK, best effort
# (ray/llm/_internal/serve/engines/vllm/vllm_models.py placement_strategy), which on a busy cluster splits the ranks
# over two nodes and runs TP's all-reduces across the network. A strategy alone is not enough: without bundles Ray
# infers a CPU engine (core/configs/accelerators.py infer_hardware_kind_from_bundles), so one GPU per rank is named.
TP_PLACEMENT = {"bundle_per_worker": {"GPU": 1}, "strategy": "STRICT_PACK"}


def deployment_config(replicas: Replicas) -> dict[str, Any]:
    if replicas.replicas is not None:
        return {"num_replicas": replicas.replicas}
    return {"autoscaling_config": {"min_replicas": replicas.min_replicas, "max_replicas": replicas.max_replicas}}


def llm_config(serving: Serving, *, replicas: Replicas, side: str | None) -> dict[str, Any]:
    """One LLMConfig. `side` is "prefill" or "decode" in PD mode, None for a colocated engine. Its engine_kwargs
    are the side's effective engine settings: serving.engine with the side's own engine block over it
    (config/schema.py Serving.engine_for); a colocated engine runs serving.engine alone."""
    engine = serving.engine_for(side)
    engine_kwargs: dict[str, Any] = engine.vllm_kwargs()
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": serving.model.id, "model_source": serving.model.source},
        "engine_kwargs": engine_kwargs,
        "deployment_config": deployment_config(replicas),
    }
    if engine.tensor_parallel_size > 1:  # the only split: PP, DP and PCP are reserved (config/engine_arg_classes.py)
        config["placement_group_config"] = copy.deepcopy(TP_PLACEMENT)
    if side is not None:
        engine_kwargs["kv_transfer_config"] = kv_transfer_config(serving.kv_backend, side)
    experimental = experimental_configs(serving, side)
    if experimental:
        config["experimental_configs"] = experimental
    return config


def experimental_configs(serving: Serving, side: str | None) -> dict[str, Any]:
    """A PD side's NIXL side-channel ports, and the stream batching where one is chosen (charts/serve_ingress.py
    stream_batching_ms; none: Ray's 50 ms, and no key). The LLMServer reads stream_batching_interval_ms for
    streamed answers only (ray/llm/_internal/serve/core/server/llm_server.py _get_batch_interval_ms)."""
    experimental: dict[str, Any] = {}
    if side is not None:
        experimental["NIXL_SIDE_CHANNEL_PORT_BASE"] = NIXL_PORT_BASE[side]
    interval_ms = stream_batching_ms(serving)
    if interval_ms is not None:
        experimental["stream_batching_interval_ms"] = interval_ms
    return experimental


def colocated_replicas(serving: Serving) -> Replicas:
    """The same GPU budget as PD: as many replicas as prefill and decode together."""
    prefill, decode = serving.prefill, serving.decode
    if prefill.replicas is not None and decode.replicas is not None:
        return Replicas(replicas=prefill.replicas + decode.replicas)
    return Replicas(min_replicas=prefill.fewest + decode.fewest, max_replicas=prefill.most + decode.most)


def build_serve_config(serving: Serving) -> dict[str, Any]:
    """The whole serveConfigV2 document: one application on route `/`."""
    if serving.mode == "pd":
        application = {
            "name": APP_NAME,
            "route_prefix": "/",
            "import_path": PD_IMPORT_PATH,
            "args": {
                "prefill_config": llm_config(serving, replicas=serving.prefill, side="prefill"),
                "decode_config": llm_config(serving, replicas=serving.decode, side="decode"),
            },
        }
    else:
        application = {
            "name": APP_NAME,
            "route_prefix": "/",
            "import_path": COLOCATED_IMPORT_PATH,
            "args": {"llm_configs": [llm_config(serving, replicas=colocated_replicas(serving), side=None)]},
        }
    return {"applications": [application]}
