"""docs/larger-model.example.yaml: the example stage of a model larger than one GPU (issue #55), tensor parallel over a
node's GPUs. Not a stage of config/: copied into a folder as <stage>.yaml, as a user would."""

from __future__ import annotations

from config.derived import gpu_spec, model_memory_floor
from config.rules.serving_engine_tuning import tp_sizes


def test_the_example_validates_with_each_engine_over_one_nodes_gpus(larger):
    cfg = larger
    assert cfg.serving.mode == "pd"
    for role in cfg.serving.engine_roles():
        assert cfg.serving.engine_for(role).tensor_parallel_size == gpu_spec(cfg).gpus == 4


def test_the_examples_model_needs_more_than_the_next_smaller_tp(larger):
    # the point of the example: below TP 4 (TP 2; TP 3 does not split the heads) the weights do not fit the L4s
    cfg = larger
    smaller = max(n for n in tp_sizes(cfg.serving.model.source, 4) if n < 4)
    engine = cfg.serving.engine.model_copy(update={"tensor_parallel_size": smaller})
    floor = model_memory_floor(cfg, engine)
    assert floor is not None and floor.needed_gib > floor.available_gib


def test_the_example_synthesizes_through_cdk_nag_with_four_gpu_workers(larger, tmp_path):
    """What a user copying it gets from synth: cdk-nag passes, the GPU nodegroup is the 4-GPU type, each Ray worker
    asks for the node's 4 GPUs, and each engine spans them."""
    import json

    from ..helpers import synth

    cfg = larger
    result = synth([cfg], tmp_path / "out")
    plugins = json.loads((result.outdir / "validation-report.json").read_text())["pluginReports"]
    assert [(p["pluginName"], p["conclusion"]) for p in plugins] == [("AwsSolutions", "success")]
    templates = result.resources(cfg.stage, "cluster", "AWS::EC2::LaunchTemplate").values()
    types = {t["Properties"]["LaunchTemplateData"].get("InstanceType") for t in templates}
    assert "g6.12xlarge" in types  # the GPU nodegroup's type sits in its EFA launch template
    rendering = result.stages[cfg.stage].rendering()
    (service,) = [o for o in rendering.objects if o["kind"] == "RayService"]
    workers = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    containers = [c for w in workers for c in w["template"]["spec"]["containers"]]
    gpus = {c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") for c in containers} - {None}
    assert gpus == {"4"}  # the Ray container; a log-relay sidecar asks for none
    (app,) = rendering.serve_config["applications"]
    roles = ("prefill_config", "decode_config")
    assert [app["args"][role]["engine_kwargs"]["tensor_parallel_size"] for role in roles] == [4, 4]
