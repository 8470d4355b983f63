"""serveConfigV2 as Ray 2.58 expects it, validated with Ray's own models (ServeDeploySchema, LLMConfig,
and the PD / OpenAI app args' fields)."""

from __future__ import annotations

import asyncio
import time

import pytest
from ray.llm._internal.serve.core.configs.llm_config import LLMConfig
from ray.serve.schema import ServeDeploySchema

from charts.serve_config import build_serve_config

from ..helpers import config_with
from .validators import DEPRECATED_PD_ARGS, LLM_ARGS, PD_ARGS, class_fields, unknown_keys


@pytest.fixture(scope="module")
def colocated(tmp_path_factory):
    return config_with(tmp_path_factory.mktemp("colocated"), serving={"mode": "colocated"})


def _app(cfg):
    (app,) = build_serve_config(cfg.serving)["applications"]
    return app


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_pd_config_validates_with_serve_deploy_schema_and_has_no_unknown_keys(stages, stage):
    config = build_serve_config(stages[stage].serving)
    ServeDeploySchema.model_validate(config)
    assert unknown_keys(ServeDeploySchema, config, skip=frozenset({"args"})) == []


def test_colocated_config_validates_with_serve_deploy_schema(colocated):
    config = build_serve_config(colocated.serving)
    ServeDeploySchema.model_validate(config)
    assert unknown_keys(ServeDeploySchema, config, skip=frozenset({"args"})) == []


def test_unknown_key_check_catches_what_ray_ignores(dev):
    config = build_serve_config(dev.serving)
    config["applications"][0]["rout_prefix"] = "/"
    ServeDeploySchema.model_validate(config)  # Ray accepts it silently...
    assert unknown_keys(ServeDeploySchema, config, skip=frozenset({"args"})) == ["applications[0].rout_prefix"]


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("side", ["prefill_config", "decode_config"])
def test_each_side_is_a_valid_llm_config(stages, stage, side):
    LLMConfig.model_validate(_app(stages[stage])["args"][side])  # LLMConfig forbids unknown keys


def test_pd_args_use_only_fields_of_pd_serving_args_and_none_deprecated(dev):
    args = _app(dev)["args"]
    fields = class_fields(*PD_ARGS)
    assert {"prefill_config", "decode_config"} <= fields
    assert set(args) <= fields - DEPRECATED_PD_ARGS
    assert set(args) == {"prefill_config", "decode_config"}


def test_pd_app_is_build_pd_openai_app_on_route_root(dev):
    app = _app(dev)
    assert app["import_path"] == "ray.serve.llm:build_pd_openai_app"
    assert app["route_prefix"] == "/"


def test_both_sides_serve_the_same_model(dev):
    args = _app(dev)["args"]
    ids = {side: args[side]["model_loading_config"] for side in ("prefill_config", "decode_config")}
    assert (
        ids["prefill_config"] == ids["decode_config"] == {"model_id": "qwen3.5-9b", "model_source": "Qwen/Qwen3.5-9B"}
    )


def test_kv_transfer_is_nixl_over_libfabric_on_both_sides_with_distinct_engine_ids(dev):
    args = _app(dev)["args"]
    configs = [args[side]["engine_kwargs"]["kv_transfer_config"] for side in ("prefill_config", "decode_config")]
    for kv in configs:
        assert kv["kv_connector"] == "NixlConnector"
        assert kv["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
    assert configs[0]["engine_id"] != configs[1]["engine_id"]


def test_each_side_names_its_kv_role(dev):
    # vLLM 0.26 deprecates kv_both with NixlConnector; Ray 2.58 passes the role through unchanged.
    args = _app(dev)["args"]
    roles = [
        args[side]["engine_kwargs"]["kv_transfer_config"]["kv_role"] for side in ("prefill_config", "decode_config")
    ]
    assert roles == ["kv_producer", "kv_consumer"]


def test_engine_settings_are_the_tuned_defaults(dev):
    # docs/DECISIONS.md, "Engine defaults from evidence"; the tutorial's own engine: the stage file under
    # evidence/2026-12-01-h200-tuned/stages-reference/.
    for side in ("prefill_config", "decode_config"):
        engine = _app(dev)["args"][side]["engine_kwargs"]
        assert engine == {
            "max_model_len": 4096,
            "dtype": "bfloat16",
            "gpu_memory_utilization": 0.90,
            "enforce_eager": False,
            "tensor_parallel_size": 1,
            "max_num_seqs": 32,
            "language_model_only": True,
            "max_cudagraph_capture_size": 512,
            "kv_cache_memory_bytes": 2455861324,
            **{k: engine[k] for k in engine if k in ("kv_transfer_config",)},
        }


def test_the_reference_stage_renders_the_tutorials_engine():
    from config import load_stage_file

    reference = load_stage_file("evidence/2026-12-01-h200-tuned/stages-reference/dev.yaml")
    for side in ("prefill_config", "decode_config"):
        engine = _app(reference)["args"][side]["engine_kwargs"]
        assert {k: v for k, v in engine.items() if k != "kv_transfer_config"} == {
            "max_model_len": 4096,
            "dtype": "bfloat16",
            "gpu_memory_utilization": 0.90,
            "enforce_eager": True,
            "tensor_parallel_size": 1,
        }


# What dev's engine changed after 2026-12-01's arms were measured: its graphs and KV cache (2026-12-05)
GRAPH_SETTINGS = ("compilation_config", "max_cudagraph_capture_size", "kv_cache_memory_bytes")


def test_the_per_role_batch_arm_differs_from_dev_only_in_each_roles_batched_tokens(dev):
    from config import load_stage_file

    def batching(kwargs):
        return {k: v for k, v in kwargs.items() if k not in GRAPH_SETTINGS}

    arm = load_stage_file("evidence/2026-12-01-h200-l4-emulated/stages-per-role-batch/dev.yaml")
    for side, tokens in (("prefill_config", 4096), ("decode_config", 512)):
        engine, base = _app(arm)["args"][side], _app(dev)["args"][side]
        assert batching(engine["engine_kwargs"]) == {
            **batching(base["engine_kwargs"]),
            "max_num_batched_tokens": tokens,
        }
        # and its way in since: HAProxy, so the decode server streams each token (charts/serve_ingress.py)
        base["experimental_configs"].pop("stream_batching_interval_ms")
        assert {k: v for k, v in engine.items() if k != "engine_kwargs"} == {
            k: v for k, v in base.items() if k != "engine_kwargs"
        }


def test_one_prefill_and_one_decode_replica(dev):
    args = _app(dev)["args"]
    assert args["prefill_config"]["deployment_config"] == {"num_replicas": 1}
    assert args["decode_config"]["deployment_config"] == {"num_replicas": 1}


def test_prod_sides_autoscale(stages):
    args = _app(stages["prod"])["args"]
    assert args["decode_config"]["deployment_config"] == {"autoscaling_config": {"min_replicas": 1, "max_replicas": 2}}


def test_nixl_side_channels_do_not_collide(dev):
    args = _app(dev)["args"]
    bases = [
        args[s]["experimental_configs"]["NIXL_SIDE_CHANNEL_PORT_BASE"] for s in ("prefill_config", "decode_config")
    ]
    assert bases == [20000, 22000]


def test_stream_batching_reaches_both_pd_sides_as_rays_experimental_config(tmp_path):
    args = _app(config_with(tmp_path, serving={"stream_batching_ms": 0}))["args"]
    read = {
        side: LLMConfig.model_validate(args[side]).experimental_configs for side in ("prefill_config", "decode_config")
    }
    assert read == {
        "prefill_config": {"NIXL_SIDE_CHANNEL_PORT_BASE": 20000, "stream_batching_interval_ms": 0},
        "decode_config": {"NIXL_SIDE_CHANNEL_PORT_BASE": 22000, "stream_batching_interval_ms": 0},
    }


def test_stream_batching_reaches_the_colocated_engine(tmp_path):
    (llm,) = _app(config_with(tmp_path, serving={"mode": "colocated", "stream_batching_ms": 10}))["args"]["llm_configs"]
    assert LLMConfig.model_validate(llm).experimental_configs == {"stream_batching_interval_ms": 10}


def test_through_serves_proxy_no_key_is_rendered_and_rays_default_holds(tmp_path):
    # No key: the serveConfigV2 (and a deployed RayService) stays as it was before the setting existed.
    proxy = {"serve_ingress": "serve_proxy"}
    assert (
        "stream_batching_interval_ms"
        not in _app(config_with(tmp_path, serving=proxy))["args"]["decode_config"]["experimental_configs"]
    )
    colocated = config_with(tmp_path, serving={**proxy, "mode": "colocated"})
    assert "experimental_configs" not in _app(colocated)["args"]["llm_configs"][0]


def test_pd_under_haproxy_streams_each_token_as_it_comes(tmp_path):
    # The decode server streams to HAProxy from its own process there: no Ray hop for a tick to spare.
    args = _app(config_with(tmp_path, serving={"serve_ingress": "haproxy"}))["args"]
    read = {
        side: LLMConfig.model_validate(args[side]).experimental_configs for side in ("prefill_config", "decode_config")
    }
    assert {side: configs["stream_batching_interval_ms"] for side, configs in read.items()} == {
        "prefill_config": 0,
        "decode_config": 0,
    }


def test_a_stages_own_stream_batching_wins_under_haproxy(tmp_path):
    args = _app(config_with(tmp_path, serving={"serve_ingress": "haproxy", "stream_batching_ms": 50}))["args"]
    assert args["decode_config"]["experimental_configs"]["stream_batching_interval_ms"] == 50


def test_colocated_under_haproxy_renders_no_batching(tmp_path):
    # vLLM's own server streams there and Serve LLM's Batcher is not on the path.
    (llm,) = _app(config_with(tmp_path, serving={"mode": "colocated", "serve_ingress": "haproxy"}))["args"][
        "llm_configs"
    ]
    assert "experimental_configs" not in llm


def test_colocated_is_build_openai_app_with_the_same_gpu_budget(colocated):
    app = _app(colocated)
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    assert set(app["args"]) <= class_fields(*LLM_ARGS)
    (llm,) = app["args"]["llm_configs"]
    LLMConfig.model_validate(llm)
    assert llm["deployment_config"] == {"num_replicas": 2}  # prefill 1 + decode 1
    assert "kv_transfer_config" not in llm["engine_kwargs"]


ENGINE_SETTINGS = {
    "max_num_seqs": 64,
    "max_num_batched_tokens": 8192,
    "enable_prefix_caching": True,
    "gdn_prefill_backend": "triton",
    "extra_args": {"enable_chunked_prefill": True, "block_size": 16},
}


def test_engine_settings_of_the_stage_file_reach_both_sides_as_vllm_engine_kwargs(tmp_path):
    cfg = config_with(tmp_path, serving={"engine": ENGINE_SETTINGS})
    args = _app(cfg)["args"]
    for side in ("prefill_config", "decode_config"):
        kwargs = args[side]["engine_kwargs"]
        assert {
            k: kwargs[k]
            for k in (
                "max_num_seqs",
                "max_num_batched_tokens",
                "enable_prefix_caching",
                "gdn_prefill_backend",
                "enable_chunked_prefill",
                "block_size",
            )
        } == {
            "max_num_seqs": 64,
            "max_num_batched_tokens": 8192,
            "enable_prefix_caching": True,
            "gdn_prefill_backend": "triton",
            "enable_chunked_prefill": True,
            "block_size": 16,
        }
        LLMConfig.model_validate(args[side])


def test_unset_engine_settings_keep_vllms_defaults(tmp_path):
    # Nothing unset is emitted: the rendered config (and its snapshot) only carries what the stage says.
    engine = {"enforce_eager": True, "cuda_graphs": None, "max_num_seqs": None, "extra_args": {}}
    kwargs = _app(config_with(tmp_path, serving={"engine": engine}))["args"]["prefill_config"]["engine_kwargs"]
    unset = {"max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching", "gdn_prefill_backend"}
    assert not (unset | {"compilation_config"}) & set(kwargs)


def test_every_typed_engine_setting_is_a_vllm_engine_argument_of_the_same_type():
    # The record is vLLM 0.26's EngineArgs (scripts/record_vllm_engine_args.py); a renamed or retyped
    # argument in a vLLM bump fails here, not on a GPU.
    import typing

    from config.engine_args import recorded
    from config.schema import Engine

    fields = recorded()
    for name in Engine.model_fields:
        if name in ("extra_args", "cuda_graphs"):  # cuda_graphs renders into compilation_config (tests/config)
            continue
        assert name in fields, name
    assert fields["compilation_config"] == "CompilationConfig"
    assert fields["max_num_seqs"] == fields["max_num_batched_tokens"] == "int | None"
    assert fields["enable_prefix_caching"] == "bool | None" and fields["enforce_eager"] == "bool"
    (literal, _none) = typing.get_args(Engine.model_fields["gdn_prefill_backend"].annotation)
    assert fields["gdn_prefill_backend"] == f"Literal[{', '.join(map(repr, typing.get_args(literal)))}] | None"


def test_a_prefill_only_engine_block_renders_into_prefills_engine_kwargs_alone(dev, tmp_path):
    prefill = {"replicas": 1, "engine": {"max_num_batched_tokens": 16384, "extra_args": {"block_size": 32}}}
    args = _app(config_with(tmp_path, serving={"prefill": prefill}))["args"]
    before = _app(dev)["args"]
    assert args["decode_config"] == before["decode_config"]  # decode: byte for byte what it was
    changed = {
        key: value
        for key, value in args["prefill_config"]["engine_kwargs"].items()
        if before["prefill_config"]["engine_kwargs"].get(key) != value
    }
    assert changed == {"max_num_batched_tokens": 16384, "block_size": 32}
    assert {k: v for k, v in args["prefill_config"].items() if k != "engine_kwargs"} == {
        k: v for k, v in before["prefill_config"].items() if k != "engine_kwargs"
    }
    for side in ("prefill_config", "decode_config"):
        LLMConfig.model_validate(args[side])


def test_a_roles_extra_args_merge_key_by_key_over_the_shared_ones(tmp_path):
    serving = {
        "engine": {"max_num_seqs": 64, "extra_args": {"enable_chunked_prefill": True, "block_size": 16}},
        "decode": {"replicas": 1, "engine": {"max_num_seqs": 128, "extra_args": {"block_size": 32}}},
    }
    args = _app(config_with(tmp_path, serving=serving))["args"]
    prefill, decode = (args[side]["engine_kwargs"] for side in ("prefill_config", "decode_config"))
    assert (prefill["max_num_seqs"], prefill["block_size"], prefill["enable_chunked_prefill"]) == (64, 16, True)
    assert (decode["max_num_seqs"], decode["block_size"], decode["enable_chunked_prefill"]) == (128, 32, True)
    # the same keys in the same order on both sides; the KV connector's role is still each side's own
    assert list(prefill) == list(decode)
    assert (prefill["kv_transfer_config"]["kv_role"], decode["kv_transfer_config"]["kv_role"]) == (
        "kv_producer",
        "kv_consumer",
    )


@pytest.mark.parametrize("side", ["prefill_config", "decode_config"])
def test_an_engine_over_several_gpus_keeps_its_ranks_on_one_node(larger, side):
    from ray.llm._internal.common.placement import PlacementGroupConfig

    llm = _app(larger)["args"][side]
    placement = PlacementGroupConfig.model_validate(llm["placement_group_config"])  # what Ray checks at start
    assert placement.strategy == "STRICT_PACK" and placement.bundle_per_worker.GPU == 1
    assert LLMConfig.model_validate(llm).accelerator_config.kind == "gpu"  # bundles without GPU would read as CPU


def test_a_one_gpu_engine_keeps_rays_default_placement(dev):
    args = _app(dev)["args"]
    assert not [side for side in args.values() if "placement_group_config" in side]  # dev's diff stays empty


# What serving.stream_batching_ms means, run in Ray 2.58's own Batcher (ray/llm/_internal/serve/utils/batcher.py),
# which the LLMServer wraps around each streamed answer with that interval (core/server/llm_server.py).
def _first_batch(interval_ms: float, wait_s: float) -> tuple[list[str], float]:
    """The first batch of a stream whose second token comes only after the first batch is out, and its wait."""
    from ray.llm._internal.serve.utils.batcher import Batcher

    async def run() -> tuple[list[str], float]:
        released = asyncio.Event()

        async def tokens():
            yield "first"
            await released.wait()
            yield "second"

        start = time.perf_counter()
        stream = Batcher(tokens(), interval_ms=interval_ms).stream()
        first = await asyncio.wait_for(stream.__anext__(), wait_s)
        waited = time.perf_counter() - start
        released.set()
        assert [batch async for batch in stream] == [["second"]]
        return list(first), waited

    return asyncio.run(run())


def test_rays_batcher_holds_the_first_token_until_its_first_tick():
    first, waited = _first_batch(50, wait_s=30)
    assert first == ["first"]
    assert waited >= 0.05  # the token was there at once; load can only make the wait longer


def test_rays_batcher_at_zero_sends_the_first_token_as_it_comes():
    assert _first_batch(0, wait_s=2)[0] == ["first"]
    with pytest.raises(TimeoutError):  # the same wait is too short for a batcher that waits a minute for its tick
        _first_batch(60_000, wait_s=2)
