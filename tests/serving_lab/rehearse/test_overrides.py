"""The rehearsal plan: the stage's own serveConfigV2 with only the listed overrides, for dev and prod,
PD and colocated (snapshots in tests/snapshots/<stage>/rehearsal-<mode>.json show what differs)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from charts.serve_config import build_serve_config
from charts.serve_ingress import serve_ingress_environment
from charts.worker_env import worker_environment
from config.schema import decode_only_graphs
from serving_lab.rehearse import overrides, port_slots
from serving_lab.rehearse.host import Gpu, Host

from ...helpers import ROOT
from .models import ATTENTION_ONLY, with_model_source

H200_PAIR = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),) * 2, efa_devices=())
L4_PAIR_WITH_EFA = Host(gpus=(Gpu("NVIDIA L4", 23034, "8.9"),) * 2, efa_devices=("rdmap0s6",))
MODEL = Path("/models/qwen3.5-9b")


def differences(before: Any, after: Any, path: str = "") -> set[str]:
    """Every path where two JSON documents differ (a key present on one side only counts too)."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = set()
        for key in before.keys() | after.keys():
            where = f"{path}.{key}" if path else key
            if key not in before or key not in after:
                found.add(where)
            else:
                found |= differences(before[key], after[key], where)
        return found
    if (
        isinstance(before, list)
        and isinstance(after, list)
        and len(before) == len(after)
        and all(isinstance(b, dict) for b in before)
    ):
        found = set()
        for index, (b, a) in enumerate(zip(before, after, strict=True)):
            found |= differences(b, a, f"{path}[{index}]")
        return found
    return set() if before == after else {path}


def outermost(paths: set[str]) -> set[str]:
    """The listed paths less those inside another listed path: an override that creates a mapping (runtime_env)
    and the overrides that then fill it are one difference from the stage's config."""
    return {p for p in paths if not any(p.startswith(q + ".") for q in paths if q != p)}


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_only_the_listed_fields_differ_from_the_stages_serve_config(stages, stage, mode):
    cfg = stages[stage]
    plan = overrides.plan(cfg, overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False))
    serving = cfg.serving.model_copy(update={"mode": mode})
    listed = {o.path for o in plan.overrides if o.path.startswith("applications")}
    assert differences(build_serve_config(serving), plan.serve_config) == outermost(listed)


@pytest.mark.parametrize("stage", ["dev", "prod"])
@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_rehearsal_plan_snapshot(stages, stage, mode):
    # Reviewers see how a rehearsal differs from what EKS runs (UPDATE_SNAPSHOTS=1 rewrites them).
    plan = overrides.plan(
        stages[stage], overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False)
    )
    text = json.dumps(plan.to_json(), indent=1, sort_keys=True) + "\n"
    snapshot = ROOT / "tests" / "snapshots" / stage / f"rehearsal-{mode}.json"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        snapshot.write_text(text)
    assert snapshot.exists(), f"no snapshot {snapshot}: run with UPDATE_SNAPSHOTS=1"
    assert text == snapshot.read_text()


def test_the_engines_get_the_worker_pods_environment(dev):
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    pod_env = {e["name"]: e.get("value", "status.podIP") for e in worker_environment(efa=False)}
    for name, value in pod_env.items():
        assert plan.env[name] == (value if value != "status.podIP" else "127.0.0.1"), name
    # plus the way in (the pods' too: charts/ray_pods.py) and what one host needs: offline, and UCX's CUDA IPC reads
    # (NIXL runs UCX without EFA)
    ingress = {e["name"] for e in serve_ingress_environment(dev.serving.serve_ingress)}
    assert set(plan.env) == set(pod_env) | ingress | set(overrides.OFFLINE) | {overrides.UCX_CUDA_IPC_READS}


def test_no_efa_device_means_ucx_and_no_fi_provider(dev):
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    args = plan.serve_config["applications"][0]["args"]
    for side in ("prefill_config", "decode_config"):
        assert args[side]["engine_kwargs"]["kv_transfer_config"]["kv_connector_extra_config"] == {"backends": ["UCX"]}
    assert "FI_PROVIDER" not in plan.env


def test_an_efa_host_keeps_libfabric_and_sets_fi_provider(dev):
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=L4_PAIR_WITH_EFA, model_dir=MODEL, real_weights=False)
    )
    args = plan.serve_config["applications"][0]["args"]
    assert args["prefill_config"]["engine_kwargs"]["kv_transfer_config"]["kv_connector_extra_config"] == {
        "backends": ["LIBFABRIC"]
    }
    assert plan.env["FI_PROVIDER"] == "efa"
    # an L4 (compute 8.9) takes FlashInfer's GDN path: no backend override
    assert "gdn_prefill_backend" not in args["prefill_config"]["engine_kwargs"]


def test_real_weights_are_not_replaced_by_dummy_ones(dev):
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=True))
    kwargs = plan.serve_config["applications"][0]["args"]["prefill_config"]["engine_kwargs"]
    assert "load_format" not in kwargs
    # the stage's own language_model_only, untouched by the plan
    assert kwargs.get("language_model_only") == dev.serving.engine.extra_args.get("language_model_only")
    assert not [o for o in plan.overrides if "language_model_only" in o.path]


def test_a_stage_that_sets_the_gdn_backend_keeps_its_own(tmp_path):
    from ...helpers import config_with

    cfg = config_with(tmp_path, serving={"engine": {"gdn_prefill_backend": "triton"}})
    plan = overrides.plan(cfg, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    assert not [o for o in plan.overrides if o.path.endswith("gdn_prefill_backend")]


def test_the_gpu_count_comes_from_the_host_and_must_fit(dev):
    assert (
        overrides.plan(
            dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False)
        ).num_gpus
        == 2
    )
    one = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
    with pytest.raises(
        overrides.PlanError, match=r"config/dev.yaml: serving: needs at least 2 GPUs .* this host has 1"
    ):
        overrides.plan(dev, overrides.PlanRequest(mode="pd", host=one, model_dir=MODEL, real_weights=False))


def test_autoscaling_is_capped_to_the_hosts_gpus(stages):
    plan = overrides.plan(
        stages["prod"], overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False)
    )
    args = plan.serve_config["applications"][0]["args"]
    assert [args[s]["deployment_config"]["autoscaling_config"] for s in ("prefill_config", "decode_config")] == [
        {"min_replicas": 1, "max_replicas": 1},
        {"min_replicas": 1, "max_replicas": 1},
    ]
    four = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),) * 4, efa_devices=())
    plan = overrides.plan(
        stages["prod"], overrides.PlanRequest(mode="pd", host=four, model_dir=MODEL, real_weights=False)
    )
    assert not [o for o in plan.overrides if "autoscaling" in o.path]  # 2 + 2 fit on 4


def test_every_override_is_printed_with_its_reason(dev):
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="colocated", host=H200_PAIR, model_dir=MODEL, real_weights=False)
    )
    for override in plan.overrides:
        line = override.line()
        assert line.startswith(f"override {override.path}: ") and "(" in line and override.reason in line


def test_share_gpus_runs_the_engines_side_by_side_with_their_share_of_memory(dev):
    one = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=one, model_dir=MODEL, real_weights=False, share_gpus=True)
    )
    assert plan.num_gpus == 1 and "CUDA_VISIBLE_DEVICES" not in plan.env
    for side in ("prefill_config", "decode_config"):
        llm = plan.serve_config["applications"][0]["args"][side]
        assert llm["placement_group_config"] == {"bundle_per_worker": {"GPU": 0.5}}  # two engines, one GPU
        kwargs = llm["engine_kwargs"]
        assert kwargs["gpu_memory_utilization"] == 0.42  # 0.90 / 2, less a margin: the two fit together
        assert kwargs["kv_cache_memory_bytes"] == int(143771 * 2**20 * overrides.SHARED_KV_CACHE_FRACTION)
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    LLMConfig.model_validate(llm)  # Ray's own model takes the shared placement


def test_pd_engines_on_one_host_get_distinct_tcpstore_port_bases(dev):
    # Both engines would otherwise probe port 100 (vLLM's ray_executor_v2 `_select_tcpstore_port`) and
    # one fail with EADDRINUSE, as seen on the H200 pair.
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    args = plan.serve_config["applications"][0]["args"]
    ports = [
        args[side]["runtime_env"]["env_vars"]["VLLM_DP_MASTER_PORT"] for side in ("prefill_config", "decode_config")
    ]
    assert ports == ["29500", "29550"]


def test_replicas_of_one_engine_config_each_claim_a_port_base_when_they_start(dev):
    # The colocated engine's two replicas share one runtime_env: each replica's worker claims a slot instead.
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="colocated", host=H200_PAIR, model_dir=MODEL, real_weights=False)
    )
    (llm,) = plan.serve_config["applications"][0]["args"]["llm_configs"]
    assert llm["runtime_env"] == {
        "env_vars": {
            port_slots.FIRST_SLOT_VAR: "29550",
            port_slots.RAY_HOOK_VAR: "serving_lab.rehearse.port_slots.claim",
        },
        # Serve LLM's own hook goes here unless the config names one; the engine's ray.init wants both the same
        "worker_process_setup_hook": "serving_lab.rehearse.port_slots.claim",
    }


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_the_rehearsal_engine_configs_validate_with_rays_llm_config(dev, mode):
    # Ray 2.58's LLMConfig forbids unknown keys: every override lands on a field Ray knows.
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    plan = overrides.plan(dev, overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False))
    args = plan.serve_config["applications"][0]["args"]
    for llm in args["llm_configs"] if mode == "colocated" else [args["prefill_config"], args["decode_config"]]:
        assert LLMConfig.model_validate(llm).runtime_env == llm.get("runtime_env")


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_ttft_phases_has_every_engine_export_its_request_spans_over_otlp_http(dev, mode):
    # vLLM exports over gRPC unless OTEL_EXPORTER_OTLP_TRACES_PROTOCOL says otherwise (vllm/tracing/otel.py)
    from ray.llm._internal.serve.core.configs.llm_config import LLMConfig

    plan = overrides.plan(
        dev, overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False, traces=True)
    )
    for _, llm in overrides.llm_configs(plan.serve_config):
        assert llm["engine_kwargs"]["otlp_traces_endpoint"] == "http://127.0.0.1:14318/v1/traces"
        assert llm["runtime_env"]["env_vars"]["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
        assert LLMConfig.model_validate(llm).runtime_env == llm["runtime_env"]
    plain = overrides.plan(dev, overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False))
    assert not [o for o in plain.overrides if "OTLP" in o.path.upper()]


def test_dummy_weights_keep_the_vision_tower_unless_the_stage_turns_it_off(stages):
    # The model folder has Qwen3.5's processor configurations (model_folder.py), so the engine builds and profiles
    # the vision tower as on EKS: nothing turns it off that the stage does not (the committed stages do, with
    # language_model_only: true; evidence/2026-12-01-h200-tuned/stages-reference/ is one that does not).
    for stage in ("dev", "prod"):
        for mode in overrides.MODES:
            plan = overrides.plan(
                stages[stage], overrides.PlanRequest(mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False)
            )
            args = plan.serve_config["applications"][0]["args"]
            llms = args["llm_configs"] if mode == "colocated" else [args["prefill_config"], args["decode_config"]]
            own = stages[stage].serving.engine.extra_args.get("language_model_only")
            assert [llm["engine_kwargs"].get("language_model_only") for llm in llms] == [own] * len(llms)
            assert not [o for o in plan.overrides if "language_model_only" in o.path]
            (source,) = {o.reason for o in plan.overrides if o.path.endswith(".model_source")}
            assert (
                source
                == "no network on the host: a local model folder (config, processor and tokenizer of the real model)"
            )


@pytest.mark.parametrize("value", [True, False])
def test_a_stage_that_sets_language_model_only_keeps_it(tmp_path, value):
    from ...helpers import config_with

    cfg = config_with(tmp_path, serving={"engine": {"extra_args": {"language_model_only": value}}})
    plan = overrides.plan(cfg, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    args = plan.serve_config["applications"][0]["args"]
    assert [args[side]["engine_kwargs"]["language_model_only"] for side in ("prefill_config", "decode_config")] == [
        value,
        value,
    ]
    assert not [o for o in plan.overrides if "language_model_only" in o.path]


def test_the_plan_is_a_list_of_small_overrides():
    # Each override one concern, run in a fixed order (as the rules of config/rules/): engine by engine, then the env.
    assert [o.__name__ for o in overrides.PLAN_OVERRIDES] == ["_other_mode", "_other_serve_path"]
    assert [o.__name__ for o in overrides.ENGINE_OVERRIDES] == [
        "_local_model_folder",
        "_full_attention_stand_in",
        "_dummy_weights",
        "_sm90_gdn_backend",
        "_shared_gpu_placement",
        "_shared_gpu_memory",
        "_emulated_memory_budget",
        "_emulated_batch_defaults",
        "_ucx_without_efa",
        "_kv_buffer_device",
        "_tcpstore_port",
        "_nixl_exporter",
        "_otlp_traces",
        "_cuda_graph_arm",
        "_oracle_usage",
        "_decode_weights",
        "_autoscaling_cap",
    ]
    assert [o.__name__ for o in overrides.ENV_OVERRIDES] == [
        "_per_worker_gpus",
        "_offline_hub",
        "_pod_environment",
        "_libfabric_environment",
        "_ucx_cuda_ipc_reads",
        "_engine_env",
        "_haproxy_connections",
    ]


ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
# Every option set `ops rehearse` takes, for both committed stages and both modes: the plans recorded in
# recorded_plans.json (UPDATE_SNAPSHOTS=1 rewrites it). One engine alone found this KV cache on the L4 budget of
# one H200 (evidence/2026-12-01-h200-l4-budget/).
OPTION_SETS = {
    "h200x2": {"host": H200_PAIR},
    "h200x1 --share-gpus": {"host": ONE_H200, "share_gpus": True},
    "h200x2 --emulate-node": {"host": H200_PAIR, "emulate_node": True},
    "h200x1 --share-gpus --emulate-node --kv-cache-bytes": {
        "host": ONE_H200,
        "share_gpus": True,
        "emulate_node": True,
        "kv_cache_bytes": 2113009755,
    },
    # no figure given: the plan names the engine configs whose KV cache one engine alone sizes first
    "h200x1 --share-gpus --emulate-node": {"host": ONE_H200, "share_gpus": True, "emulate_node": True},
    "l4x2 efa": {"host": L4_PAIR_WITH_EFA},
    "h200x2 --weights": {"host": H200_PAIR, "real_weights": True},
    # the stage's LIBFABRIC kept on a host without EFA: libfabric's tcp provider; the KV cache stays on the GPU (the
    # host buffer cannot hold Qwen3.5's state layers in vLLM 0.26: refused, test below)
    "h200x1 --share-gpus --nixl-backend LIBFABRIC --kv-buffer-device cuda": {
        "host": ONE_H200,
        "share_gpus": True,
        "transport": overrides.Transport(
            nixl_backend="LIBFABRIC", kv_buffer_device="cuda", libfabric="/tmp/rehearsal-site/libfabric"
        ),
    },
    # the engines export their request spans to the rehearsal's receiver (serving_lab/rehearse/traces.py)
    "h200x2 --ttft-phases": {"host": H200_PAIR, "traces": True},
    "h200x1 --share-gpus --kv-buffer-device cuda --engine-env": {
        "host": ONE_H200,
        "share_gpus": True,
        "transport": overrides.Transport(
            kv_buffer_device="cuda", engine_env=(("UCX_CUDA_IPC_ENABLE_GET_ZCOPY", "n"), ("UCX_TLS", "tcp"))
        ),
    },
    # the stages' HAProxy ingress on a host that allows 20,000 open files (the H200 host's limit)
    "h200x1 --share-gpus, 20,000 open files": {
        "host": Host(gpus=ONE_H200.gpus, efa_devices=(), open_files=20_000),
        "share_gpus": True,
    },
    # Serve's own proxy measured beside the stages' HAProxy
    "h200x1 --share-gpus --serve-ingress serve_proxy": {
        "host": Host(gpus=ONE_H200.gpus, efa_devices=(), open_files=20_000),
        "share_gpus": True,
        "serve_ingress": "serve_proxy",
    },
}


def _value_at(document: Any, path: str) -> Any:
    for part in path.replace("]", "").replace("[", ".").split("."):
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def test_the_plans_are_the_recorded_ones(stages):
    recorded_file = Path(__file__).with_name("recorded_plans.json")
    plans = {}
    for stage in ("dev", "prod"):
        for mode in overrides.MODES:
            for name, options in OPTION_SETS.items():
                options = {"real_weights": False, **options}
                plan = overrides.plan(stages[stage], overrides.PlanRequest(mode=mode, model_dir=MODEL, **options))
                # the serve config is the stage's own with exactly the listed overrides (their values recorded below)
                ingress = options.get("serve_ingress", stages[stage].serving.serve_ingress)
                serving = stages[stage].serving.model_copy(update={"mode": mode, "serve_ingress": ingress})
                listed = {o.path: o.after for o in plan.overrides if o.path.startswith("applications")}
                assert differences(build_serve_config(serving), plan.serve_config) == outermost(set(listed))
                assert all(_value_at(plan.serve_config, path) == after for path, after in listed.items())
                # and the env the worker pods' own with the listed env overrides
                pod_env = {
                    e["name"]: e.get("value", "status.podIP")
                    for e in [
                        *worker_environment(efa=options["host"].has_efa),
                        *serve_ingress_environment(ingress),
                    ]
                }
                env = {
                    o.path.removeprefix("worker env "): o.after
                    for o in plan.overrides
                    if o.path.startswith("worker env ")
                }
                assert plan.env == {**pod_env, **env}
                plans[f"{stage} {mode} {name}"] = {
                    "num_gpus": plan.num_gpus,
                    "engines": plan.engines,
                    "label": plan.label,
                    **({"kv_profiles": plan.kv_profiles} if plan.kv_profiles else {}),
                    "overrides": [o.line() for o in plan.overrides],
                }
    text = json.dumps(plans, indent=1, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        recorded_file.write_text(text)
    assert recorded_file.exists(), f"no {recorded_file.name}: run with UPDATE_SNAPSHOTS=1"
    assert text == recorded_file.read_text()


def _kv(plan: overrides.Plan, side: str = "prefill_config") -> dict[str, Any]:
    return plan.serve_config["applications"][0]["args"][side]["engine_kwargs"]["kv_transfer_config"]


LIBFABRIC_TREE = "/tmp/rehearsal-site/libfabric"


def test_libfabric_kept_without_efa_runs_the_tcp_provider_from_the_carried_tree_with_a_host_buffer(dev):
    transport = overrides.Transport(nixl_backend="LIBFABRIC", libfabric=LIBFABRIC_TREE)
    cfg = with_model_source(dev, ATTENTION_ONLY)
    plan = overrides.plan(
        cfg,
        overrides.PlanRequest(
            mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=False, share_gpus=True, transport=transport
        ),
    )
    for side in ("prefill_config", "decode_config"):
        assert _kv(plan, side)["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
        assert _kv(plan, side)["kv_buffer_device"] == "cpu"  # NIXL registers host memory only on tcp
    assert plan.env["FI_PROVIDER"] == "tcp"
    assert plan.env["LD_LIBRARY_PATH"] == f"{LIBFABRIC_TREE}/lib"
    assert "FI_TCP_IFACE" not in plan.env  # loopback failed on the H200 host; the provider's first interface is used
    assert overrides.UCX_CUDA_IPC_READS not in plan.env  # NIXL does not run UCX here
    lines = "\n".join(o.line() for o in plan.overrides)
    assert "worker env FI_PROVIDER: 'efa' -> 'tcp'" in lines  # what the stage's EFA pods set, and what runs here
    assert "FABRIC_1.7" in lines and "registers host memory only" in lines


@pytest.mark.parametrize(
    ("transport", "named"),
    [
        (overrides.Transport(nixl_backend="LIBFABRIC", libfabric=LIBFABRIC_TREE), "--nixl-backend LIBFABRIC"),
        (overrides.Transport(kv_buffer_device="cpu"), "--kv-buffer-device cpu"),
    ],
)
def test_a_host_kv_buffer_for_a_gated_deltanet_model_is_refused_in_one_line(dev, transport, named):
    # seen on an H200: every engine died in vLLM 0.26's initialize_host_xfer_buffer (evidence/2026-12-02-...)
    with pytest.raises(overrides.PlanError) as refused:
        overrides.plan(
            dev,
            overrides.PlanRequest(
                mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=False, share_gpus=True, transport=transport
            ),
        )
    message = str(refused.value)
    assert message.startswith(named) and "\n" not in message
    assert "Qwen/Qwen3.5-9B" in message and "--kv-buffer-device cuda" in message


def test_one_host_over_ucx_turns_cuda_ipc_reads_on(dev):
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=False, share_gpus=True)
    )
    assert plan.env[overrides.UCX_CUDA_IPC_READS] == "y"
    recorded = {o.path: (o.before, o.after) for o in plan.overrides}
    assert recorded[f"worker env {overrides.UCX_CUDA_IPC_READS}"] == (None, "y")


def test_an_efa_host_running_the_stages_libfabric_leaves_ucx_alone(dev):
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=L4_PAIR_WITH_EFA, model_dir=MODEL, real_weights=False)
    )
    assert overrides.UCX_CUDA_IPC_READS not in plan.env


def test_engine_env_overrides_the_cuda_ipc_reads(dev):
    transport = overrides.Transport(engine_env=((overrides.UCX_CUDA_IPC_READS, "n"),))
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, transport=transport)
    )
    assert plan.env[overrides.UCX_CUDA_IPC_READS] == "n"


def test_libfabric_kept_with_a_cuda_buffer_when_asked(dev):
    transport = overrides.Transport(nixl_backend="LIBFABRIC", kv_buffer_device="cuda", libfabric=LIBFABRIC_TREE)
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="pd", host=ONE_H200, model_dir=MODEL, real_weights=False, share_gpus=True, transport=transport
        ),
    )
    assert _kv(plan)["kv_buffer_device"] == "cuda"
    assert any(o.path.endswith("kv_buffer_device") and o.reason == "--kv-buffer-device" for o in plan.overrides)


def test_an_efa_host_keeps_libfabric_on_efa_with_vllms_buffer(dev):
    transport = overrides.Transport(nixl_backend="LIBFABRIC", libfabric=LIBFABRIC_TREE)
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="pd", host=L4_PAIR_WITH_EFA, model_dir=MODEL, real_weights=False, transport=transport
        ),
    )
    assert _kv(plan)["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
    assert "kv_buffer_device" not in _kv(plan)
    assert plan.env["FI_PROVIDER"] == "efa" and "LD_LIBRARY_PATH" not in plan.env


def test_ucx_can_be_asked_for_on_an_efa_host(dev):
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="pd",
            host=L4_PAIR_WITH_EFA,
            model_dir=MODEL,
            real_weights=False,
            transport=overrides.Transport(nixl_backend="UCX"),
        ),
    )
    assert _kv(plan)["kv_connector_extra_config"] == {"backends": ["UCX"]}


def test_engine_env_is_an_override_with_the_value_it_replaces(dev):
    transport = overrides.Transport(engine_env=(("UCX_TLS", "tcp,cuda_copy"), ("NIXL_LOG_LEVEL", "DEBUG")))
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, transport=transport)
    )
    assert plan.env["UCX_TLS"] == "tcp,cuda_copy" and plan.env["NIXL_LOG_LEVEL"] == "DEBUG"
    recorded = {o.path: (o.before, o.after) for o in plan.overrides}
    assert recorded["worker env UCX_TLS"] == (None, "tcp,cuda_copy")
    assert recorded["worker env NIXL_LOG_LEVEL"] == ("INFO", "DEBUG")


def test_colocated_mode_has_no_kv_buffer_to_place(dev):
    transport = overrides.Transport(nixl_backend="LIBFABRIC", libfabric=LIBFABRIC_TREE)
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="colocated", host=H200_PAIR, model_dir=MODEL, real_weights=False, transport=transport
        ),
    )
    assert not [o for o in plan.overrides if "kv_buffer_device" in o.path or "backends" in o.path]


def test_the_full_attention_stand_in_moves_its_kv_cache_over_libfabric_through_host_memory(dev):
    transport = overrides.Transport(nixl_backend="LIBFABRIC", libfabric=LIBFABRIC_TREE)
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="pd",
            host=ONE_H200,
            model_dir=MODEL,
            real_weights=False,
            share_gpus=True,
            transport=transport,
            full_attention=True,
        ),
    )
    for side in ("prefill_config", "decode_config"):
        kwargs = plan.serve_config["applications"][0]["args"][side]["engine_kwargs"]
        assert _kv(plan, side)["kv_buffer_device"] == "cpu"
        assert _kv(plan, side)["kv_connector_extra_config"] == {"backends": ["LIBFABRIC"]}
        assert "gdn_prefill_backend" not in kwargs  # no Gated DeltaNet layer to prefill on SM90
        assert kwargs["language_model_only"] is True  # the stage's; vLLM ignores it for a text-only model
    stand_in = [o for o in plan.overrides if o.path.endswith("model_source (architecture)")]
    assert [(o.before, o.after) for o in stand_in] == [
        ("Qwen/Qwen3.5-9B", "Qwen3ForCausalLM of its size, every layer full attention")
    ] * 2


def test_shared_gpus_keep_the_stages_tp_placement(larger):
    # four GPUs, two TP 4 engines: each rank takes half a GPU, and the ranks of one engine still stay on one node
    four = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),) * 4, efa_devices=())
    plan = overrides.plan(
        larger, overrides.PlanRequest(mode="pd", host=four, model_dir=MODEL, real_weights=False, share_gpus=True)
    )
    for side in ("prefill_config", "decode_config"):
        placement = plan.serve_config["applications"][0]["args"][side]["placement_group_config"]
        assert placement == {"bundle_per_worker": {"GPU": 0.5}, "strategy": "STRICT_PACK"}


def _decode_only(cfg):
    """The stage as it was until 2026-12-05: decode_only graphs, vLLM's KV sizing."""
    args = {k: v for k, v in cfg.serving.engine.extra_args.items() if k not in overrides.CAPTURE_ARGS}
    args.pop("kv_cache_memory_bytes", None)
    engine = cfg.serving.engine.model_copy(update={"cuda_graphs": "decode_only", "extra_args": args})
    return cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"engine": engine})})


def _engines_of(plan: overrides.Plan) -> list[dict[str, Any]]:
    args = plan.serve_config["applications"][0]["args"]
    return [e["engine_kwargs"] for e in args.get("llm_configs") or [args["prefill_config"], args["decode_config"]]]


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_the_vllm_default_arm_drops_a_decode_only_stages_graph_settings(dev, mode):
    request = overrides.PlanRequest(
        mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False, cuda_graphs="vllm-default"
    )
    plan = overrides.plan(_decode_only(dev), request)
    engines = _engines_of(plan)
    assert engines and all("compilation_config" not in e for e in engines)
    assert [o.after for o in plan.overrides if o.path.endswith(".compilation_config")] == [None] * len(engines)


def test_the_vllm_default_arm_is_the_committed_stage(dev):
    # dev compiles with vLLM's own graph modes (no compilation_config): the arm changes nothing there
    request = overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False)
    arm = overrides.plan(dev, dataclasses.replace(request, cuda_graphs="vllm-default"))
    assert arm.serve_config == overrides.plan(dev, request).serve_config


def test_the_breakable_arm_captures_piecewise_graphs_without_compile_and_says_so_to_vllm(dev):
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, cuda_graphs="breakable"),
    )
    for side in ("prefill_config", "decode_config"):
        llm = plan.serve_config["applications"][0]["args"][side]
        # without the variable vLLM 0.26 turns piecewise graphs without compile into none (config/vllm.py)
        assert llm["engine_kwargs"]["compilation_config"] == {"mode": 0, "cudagraph_mode": "FULL_AND_PIECEWISE"}
        assert llm["engine_kwargs"]["max_cudagraph_capture_size"] == 512  # the stage's own, kept
        assert llm["runtime_env"]["env_vars"]["VLLM_USE_BREAKABLE_CUDAGRAPH"] == "1"


@pytest.mark.parametrize(
    ("arm", "graphs"),
    [
        ("vllm-default@256", {"max_cudagraph_capture_size": 256}),
        ("breakable@256", {"mode": 0, "cudagraph_mode": "FULL_AND_PIECEWISE", "max_cudagraph_capture_size": 256}),
        ("decode-only@16", {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY", "max_cudagraph_capture_size": 16}),
    ],
)
def test_an_arm_at_n_tokens_captures_batches_of_up_to_n_tokens(dev, arm, graphs):
    # vLLM's default capture size is twice max_num_seqs (64 here): a 256-token prefill would run outside every graph
    request = overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, cuda_graphs=arm)
    plan = overrides.plan(dev, request)
    for engine in _engines_of(plan):
        assert engine["compilation_config"] == graphs
        # vLLM refuses the size both there and as an engine argument: the stage's is taken out, and listed
        assert "max_cudagraph_capture_size" not in engine
    taken = [o for o in plan.overrides if o.path.endswith("engine_kwargs.max_cudagraph_capture_size")]
    assert [(o.before, o.after) for o in taken] == [(512, None)] * 2


def test_the_decode_only_arm_is_the_stage_fields_value_up_to_max_num_seqs(dev):
    request = overrides.PlanRequest(
        mode="colocated", host=H200_PAIR, model_dir=MODEL, real_weights=False, cuda_graphs="decode-only"
    )
    (engine,) = _engines_of(overrides.plan(dev, request))
    assert engine["compilation_config"] == decode_only_graphs(dev.serving.engine.max_num_seqs)
    assert engine["compilation_config"] == _decode_only(dev).serving.engine.vllm_kwargs()["compilation_config"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("eager", "'eager' (allowed: vllm-default, breakable, decode-only, each also with @N)"),
        ("vllm-default@", "'vllm-default@' (allowed: vllm-default, breakable, decode-only, each also with @N)"),
        ("breakable@0", "breakable@0: @N from 1 to 8192"),
        ("breakable@8193", "breakable@8193: @N from 1 to 8192"),
    ],
)
def test_an_arm_outside_the_grammar_is_one_line(text, said):
    with pytest.raises(ValueError) as refused:
        overrides.cuda_graph_arm(text)
    assert str(refused.value) == said


def test_serve_proxy_is_an_override_that_sets_no_serve_ingress_variable(dev):
    request = overrides.PlanRequest(
        mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, serve_ingress="serve_proxy"
    )
    plan = overrides.plan(dev, request)
    recorded = {o.path: (o.before, o.after) for o in plan.overrides}
    assert recorded["serving.serve_ingress"] == ("haproxy", "serve_proxy")
    assert not {
        name
        for name in plan.env
        if name.startswith(("RAY_SERVE_ENABLE_HA", "RAY_SERVE_LLM_ENABLE", "RAY_SERVE_HAPROXY"))
    }


def test_the_stages_haproxy_is_no_override_and_the_pods_variables_follow(dev):
    plan = overrides.plan(dev, overrides.PlanRequest(mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False))
    assert not [o for o in plan.overrides if o.path == "serving.serve_ingress"]
    assert plan.env["RAY_SERVE_ENABLE_HA_PROXY"] == "1" and plan.env["RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING"] == "1"


@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_stream_batching_ms_reaches_every_engine_config_as_an_override(dev, mode):
    request = overrides.PlanRequest(
        mode=mode, host=H200_PAIR, model_dir=MODEL, real_weights=False, stream_batching_ms=7
    )
    plan = overrides.plan(dev, request)
    recorded = {o.path: (o.before, o.after, o.reason) for o in plan.overrides}
    assert recorded["serving.stream_batching_ms"] == (dev.serving.stream_batching_ms, 7, "--stream-batching-ms")
    assert [
        llm["experimental_configs"]["stream_batching_interval_ms"]
        for _, llm in overrides.llm_configs(plan.serve_config)
    ] == ([7, 7] if mode == "pd" else [7])


def test_the_stages_own_stream_batching_is_no_override(dev):
    request = overrides.PlanRequest(
        mode="pd",
        host=H200_PAIR,
        model_dir=MODEL,
        real_weights=False,
        stream_batching_ms=dev.serving.stream_batching_ms,
    )
    plan = overrides.plan(dev, request)
    assert not [o for o in plan.overrides if o.path == "serving.stream_batching_ms"]


def test_a_host_whose_file_limit_refuses_haproxys_default_gets_the_connections_that_fit(dev):
    h200 = Host(gpus=H200_PAIR.gpus, efa_devices=(), open_files=20_000)
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=h200, model_dir=MODEL, real_weights=False, serve_ingress="haproxy")
    )
    assert plan.env["RAY_SERVE_HAPROXY_MAXCONN"] == "7960"  # (20,000 - 36 - 64) x 2 / 5
    (override,) = [o for o in plan.overrides if o.path == "worker env RAY_SERVE_HAPROXY_MAXCONN"]
    assert "20000 open files" in override.reason and "50036" in override.reason


# Serve's default 20,000 connections with room for 64 backend servers: 50,100 open files
@pytest.mark.parametrize(
    ("open_files", "maxconn"), [(50_036, "19974"), (50_099, "19999"), (50_100, None), (None, None)]
)
def test_the_connection_limit_is_cut_only_where_serves_default_and_its_servers_do_not_fit(dev, open_files, maxconn):
    host = Host(gpus=H200_PAIR.gpus, efa_devices=(), open_files=open_files)
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=host, model_dir=MODEL, real_weights=False, serve_ingress="haproxy")
    )
    assert plan.env.get("RAY_SERVE_HAPROXY_MAXCONN") == maxconn


def test_haproxy_turned_on_by_engine_env_gets_the_same_cut(dev):
    h200 = Host(gpus=H200_PAIR.gpus, efa_devices=(), open_files=20_000)
    transport = overrides.Transport(engine_env=(("RAY_SERVE_ENABLE_HA_PROXY", "1"),))
    plan = overrides.plan(
        dev, overrides.PlanRequest(mode="pd", host=h200, model_dir=MODEL, real_weights=False, transport=transport)
    )
    assert plan.env["RAY_SERVE_HAPROXY_MAXCONN"] == "7960"


def test_a_connection_limit_given_by_engine_env_is_kept(dev):
    h200 = Host(gpus=H200_PAIR.gpus, efa_devices=(), open_files=20_000)
    transport = overrides.Transport(engine_env=(("RAY_SERVE_HAPROXY_MAXCONN", "4096"),))
    plan = overrides.plan(
        dev,
        overrides.PlanRequest(
            mode="pd", host=h200, model_dir=MODEL, real_weights=False, transport=transport, serve_ingress="haproxy"
        ),
    )
    assert plan.env["RAY_SERVE_HAPROXY_MAXCONN"] == "4096"
    assert [o.after for o in plan.overrides if o.path == "worker env RAY_SERVE_HAPROXY_MAXCONN"] == ["4096"]


def test_an_unknown_serve_ingress_is_a_plan_error_naming_the_option(dev):
    with pytest.raises(overrides.PlanError, match=r"--serve-ingress: 'nginx' \(allowed: serve_proxy, haproxy\)"):
        overrides.plan(
            dev,
            overrides.PlanRequest(
                mode="pd", host=H200_PAIR, model_dir=MODEL, real_weights=False, serve_ingress="nginx"
            ),
        )
