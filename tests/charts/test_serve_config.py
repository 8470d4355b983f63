"""serveConfigV2 as Ray 2.58 expects it, validated with Ray's own models (ServeDeploySchema, LLMConfig,
and the PD / OpenAI app args' fields)."""
from __future__ import annotations

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
    assert ids["prefill_config"] == ids["decode_config"] == {"model_id": "qwen3.5-9b",
                                                             "model_source": "Qwen/Qwen3.5-9B"}


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
    roles = [args[side]["engine_kwargs"]["kv_transfer_config"]["kv_role"] for side in ("prefill_config", "decode_config")]
    assert roles == ["kv_producer", "kv_consumer"]


def test_engine_settings_are_the_reference_values(dev):
    for side in ("prefill_config", "decode_config"):
        engine = _app(dev)["args"][side]["engine_kwargs"]
        assert {k: engine[k] for k in ("max_model_len", "dtype", "gpu_memory_utilization", "enforce_eager",
                                       "tensor_parallel_size")} == \
            {"max_model_len": 4096, "dtype": "bfloat16", "gpu_memory_utilization": 0.90, "enforce_eager": True,
             "tensor_parallel_size": 1}


def test_one_prefill_and_one_decode_replica(dev):
    args = _app(dev)["args"]
    assert args["prefill_config"]["deployment_config"] == {"num_replicas": 1}
    assert args["decode_config"]["deployment_config"] == {"num_replicas": 1}


def test_prod_sides_autoscale(stages):
    args = _app(stages["prod"])["args"]
    assert args["decode_config"]["deployment_config"] == {"autoscaling_config": {"min_replicas": 1,
                                                                                  "max_replicas": 2}}


def test_nixl_side_channels_do_not_collide(dev):
    args = _app(dev)["args"]
    bases = [args[s]["experimental_configs"]["NIXL_SIDE_CHANNEL_PORT_BASE"] for s in ("prefill_config", "decode_config")]
    assert bases == [20000, 22000]


def test_colocated_is_build_openai_app_with_the_same_gpu_budget(colocated):
    app = _app(colocated)
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    assert set(app["args"]) <= class_fields(*LLM_ARGS)
    (llm,) = app["args"]["llm_configs"]
    LLMConfig.model_validate(llm)
    assert llm["deployment_config"] == {"num_replicas": 2}  # prefill 1 + decode 1
    assert "kv_transfer_config" not in llm["engine_kwargs"]
