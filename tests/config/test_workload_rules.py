"""The workload's allowlists (config/rules/): the weight cache's host and container folders, the
serving namespace, the GPUs a replica takes, the model source, admin principals EKS accepts, and no bool
where a number belongs. Each class is tried with variants the old denylists let through; every refusal is
one line naming the stage file and the field."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from config import ConfigError

from ..helpers import config_with, merge, stage_data, write_stage
from ..helpers import refusal as _refusal

# Hopper nodes for models too big for an L4 (the GDN backend and resources as a p5 stage needs them).
P5 = {
    "gpu_nodegroup": {"instance_type": "p5.48xlarge"},
    "serving": {
        "engine": {"gdn_prefill_backend": "triton"},
        "worker_resources": {"cpu_request": 8, "cpu_limit": 16, "memory_request_gib": 32, "memory_limit_gib": 64},
    },
}
# Four L4s per node (g6.12xlarge), two nodes.
FOUR_L4 = {"gpu_nodegroup": {"instance_type": "g6.12xlarge"}}


def _engine(**extra_args):
    return {"serving": {"engine": {"extra_args": extra_args}}}


# --- 10. the weight cache: host folder and container folder ------------------------------------------------


@pytest.mark.parametrize(
    "host_path",
    [
        "/etc",
        "/etc/kubernetes",
        "/var",
        "/var/lib",
        "/var/lib/kubelet",
        "/var/lib/kubelet/pods/x",
        "/var/lib/containerd/x",
        "/var/lib/cni",
        "/var/log/pods",
        "/run/containerd",
        "/proc/1/root",
        "/sys/fs",
        "/root/cache",
        "/home/ec2-user/cache",
        "/usr/local/models",
        "/opt/models",
        "/mnt/models",
        "/data/model-cache",
        "/var/cache/models",
        "/srv/models",
        "/var/lib/model-cache-evil",
        "/var/lib/model-cachex/y",
        "/var/lib/cache..",
        "/var/lib/pd-inference",
        "/boot/x",
        "/tmp/models",
        "/dev/shm/x",
        "/var/run/x",
    ],
)
def test_the_host_path_outside_the_weight_cache_folder_is_refused(tmp_path, host_path):
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"host_path": host_path}}})
    assert f": serving.weight_cache.host_path: {host_path} is outside the node's weight cache folder" in line
    assert "(allowed: /var/lib/model-cache, or a folder under /var/lib/model-cache/)" in line


@pytest.mark.parametrize(
    "host_path, problem",
    [
        ("/var/lib/model-cache/../../../etc", "has a '..' segment"),
        ("/var/lib/model-cache/..", "has a '..' segment"),
        ("/var/lib/../etc", "has a '..' segment"),
        ("/var/lib/model-cache/./x", "has a '.' segment"),
        ("/var/lib/model-cache/.", "has a '.' segment"),
        ("/var/lib/model-cache/", "has an empty segment"),
        ("//var/lib/model-cache", "has an empty segment"),
        ("/var/lib//model-cache", "has an empty segment"),
        ("//", "has an empty segment"),
        ("/var/lib/model-cache/.ssh", "is not a plain name"),
        ("/var/lib/..cache", "is not a plain name"),
        ("/var/lib/model-cache/...", "is not a plain name"),
        ("/var/lib/model-cache/-rf", "is not a plain name"),
        ("/var/lib/model-cache/" + "a" * 65, "is not a plain name"),
    ],
)
def test_the_host_path_must_be_in_normal_form(tmp_path, host_path, problem):
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"host_path": host_path}}})
    assert ": serving.weight_cache.host_path: " in line and problem in line


@pytest.mark.parametrize(
    "host_path",
    [
        "relative/cache",
        "/var/lib/model-cache/a b",
        "/var/lib/model-cache/\u00e9",
        "/var/lib/model-cache\n",
        "/var/lib/model-cache/$(id)",
        "/var/lib/model-cache/*",
        "/var/lib/model-cache/" + "a" * 200,
    ],
)
def test_the_host_path_has_only_plain_characters_and_a_bounded_length(tmp_path, host_path):
    assert ": serving.weight_cache.host_path: " in _refusal(
        tmp_path, {"serving": {"weight_cache": {"host_path": host_path}}}
    )


@pytest.mark.parametrize(
    "host_path",
    [
        "/var/lib/model-cache",
        "/var/lib/model-cache/qwen",
        "/var/lib/model-cache/Qwen_3.5-9B/v1",
        "/var/lib/model-cache/a..b",
    ],
)
def test_the_weight_cache_folder_and_folders_below_it_are_accepted(tmp_path, host_path):
    cfg = config_with(tmp_path, serving={"weight_cache": {"host_path": host_path}})
    assert cfg.serving.weight_cache.host_path == host_path


@pytest.mark.parametrize(
    "mount_path",
    [
        "/etc",
        "/usr",
        "/usr/lib",
        "/bin",
        "/sbin",
        "/lib",
        "/lib64",
        "/proc",
        "/sys",
        "/dev",
        "/dev/shm",
        "/dev/shm/cache",
        "/tmp",
        "/tmp/ray",
        "/tmp/ray/cache",
        "/var/run",
        "/var/run/secrets/huggingface",
        "/run",
        "/root",
        "/home",
        "/home/ray/cache",
        "/boot",
        "/var/lib",
        "/opt",
        "/mnt",
        "/model-cache-x",
        "/modelsx",
        "/data",
    ],
)
def test_the_mount_path_outside_its_own_folders_is_refused(tmp_path, mount_path):
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"mount_path": mount_path}}})
    assert f": serving.weight_cache.mount_path: {mount_path} is outside the folders the cache may be mounted at" in line


@pytest.mark.parametrize(
    "mount_path, problem",
    [
        ("/model-cache/../etc", "has a '..' segment"),
        ("/model-cache/./x", "has a '.' segment"),
        ("/model-cache/", "has an empty segment"),
        ("//model-cache", "has an empty segment"),
    ],
)
def test_the_mount_path_must_be_in_normal_form(tmp_path, mount_path, problem):
    line = _refusal(tmp_path, {"serving": {"weight_cache": {"mount_path": mount_path}}})
    assert ": serving.weight_cache.mount_path: " in line and problem in line


@pytest.mark.parametrize("mount_path", ["/model-cache", "/model-cache/hf", "/models", "/models/qwen", "/mnt/weights"])
def test_the_mount_paths_of_its_own_are_accepted(tmp_path, mount_path):
    assert config_with(tmp_path, serving={"weight_cache": {"mount_path": mount_path}}).serving.weight_cache.mount_path


def test_no_other_mount_of_the_worker_pod_is_in_the_cache_folders(dev):
    """A tripwire: the chart's own mounts (and any added later) stay off the cache's allowed folders."""
    from charts.ray_pods import TokenMount, plain_template, worker_pod_template
    from config.derived import worker_resources
    from config.rules.weight_cache import HOST_ROOT, MOUNT_PARENTS, MOUNT_ROOTS

    pod = plain_template(
        worker_pod_template(
            image="x",
            resources=worker_resources(dev),
            privilege="privileged",
            weight_cache=dev.serving.weight_cache,
            service_account="sa",
            token=TokenMount("spc"),
            labels={},
            log_relay=True,
        )
    )
    mounts = [
        m["mountPath"]
        for c in pod["spec"]["containers"]
        for m in c.get("volumeMounts", [])
        if m["name"] != "model-cache"
    ]
    assert {"/dev/shm", "/tmp/ray", "/var/run/secrets/huggingface"} <= set(mounts)
    for mount in mounts:
        for root in MOUNT_ROOTS + MOUNT_PARENTS:
            assert not (mount == root or mount.startswith(root + "/") or root.startswith(mount.rstrip("/") + "/")), (
                mount,
                root,
            )
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "model-cache"]
    assert volume["hostPath"]["path"] == HOST_ROOT == dev.serving.weight_cache.host_path


# --- 11. the serving namespace: never one Kubernetes or this app's add-ons use -------------------------------


@pytest.mark.parametrize(
    "namespace, phrase",
    [
        ("kube-system", "is a Kubernetes system namespace"),
        ("kube-public", "is a Kubernetes system namespace"),
        ("kube-node-lease", "is a Kubernetes system namespace"),
        ("default", "is a Kubernetes system namespace"),
        ("kube-anything", "is a Kubernetes system namespace"),
        ("kuberay-system", "is the KubeRay operator's namespace (its Helm release), which this app installs"),
        ("amazon-cloudwatch", "is the CloudWatch Observability add-on's namespace, which this app installs"),
        ("amazon-guardduty", "is in a namespace class AWS installs its agents into (amazon-*, aws-*)"),
        ("amazon-network-flow-monitor", "is in a namespace class AWS installs its agents into (amazon-*, aws-*)"),
        ("aws-observability", "is in a namespace class AWS installs its agents into (amazon-*, aws-*)"),
        ("aws-anything-new", "is in a namespace class AWS installs its agents into (amazon-*, aws-*)"),
    ],
)
def test_the_serving_namespace_is_never_kubernetes_or_an_add_on(tmp_path, namespace, phrase):
    line = _refusal(tmp_path, {"serving": {"namespace": namespace}})
    assert f": serving.namespace: {namespace} {phrase}" in line and "deletes it on destroy" in line


def test_every_namespace_the_app_installs_into_is_refused(tmp_path):
    """Derived from the code that installs them: every Helm release (with and without EFA), the add-on
    namespaces the cluster stack creates, and the CloudWatch add-on's."""
    from config.rules.serving import APP_NAMESPACES, KUBERNETES_NAMESPACES
    from config.schema import Addons
    from config.topology import CLOUDWATCH_NAMESPACE
    from stacks.addons import ADDON_NAMESPACES, helm_releases

    used = {r.namespace for efa in (True, False) for r in helm_releases(Addons(), efa=efa)}
    used |= set(ADDON_NAMESPACES) | {CLOUDWATCH_NAMESPACE}
    assert used <= set(APP_NAMESPACES) | set(KUBERNETES_NAMESPACES), used
    for index, namespace in enumerate(sorted(used)):
        (tmp_path / str(index)).mkdir()
        assert ": serving.namespace: " in _refusal(tmp_path / str(index), {"serving": {"namespace": namespace}})


@pytest.mark.parametrize("namespace", ["a" * 64, "Inference", "-inference", "inference-", "in_ference", "kube-"])
def test_the_serving_namespace_is_a_dns_1123_label(tmp_path, namespace):
    assert ": serving.namespace: " in _refusal(tmp_path, {"serving": {"namespace": namespace}})


@pytest.mark.parametrize("namespace", ["inference", "a" * 63, "llm-serving", "kuberay", "cloudwatch", "x"])
def test_a_namespace_of_its_own_is_accepted(tmp_path, namespace):
    assert config_with(tmp_path, serving={"namespace": namespace}).serving.namespace == namespace


# --- 14. GPUs per replica: TP x PP x PCP x DP ---------------------------------------------------------------
# The parallel sizes beyond TP reach the engine through extra_args. Whether the schema admits them there is the
# engine-argument rules' decision; the GPU accounting must count them either way, so these tests give the
# config its extra_args past that validation (model_copy does not validate) and call the rules themselves.


def _parallel(cfg, count=None, tp=None, **extra):
    """`cfg` with these engine extra_args (unvalidated), and optionally another node count or TP."""
    engine = cfg.serving.engine.model_copy(
        update={
            "extra_args": {**cfg.serving.engine.extra_args, **extra},
            **({"tensor_parallel_size": tp} if tp else {}),
        }
    )
    update = {"serving": cfg.serving.model_copy(update={"engine": engine})}
    if count:
        update["gpu_nodegroup"] = cfg.gpu_nodegroup.model_copy(update={"count": count})
    return cfg.model_copy(update=update)


def _capacity_refusal(cfg) -> ConfigError:
    from config.rules.serving_roles import serving_capacity

    with pytest.raises(ConfigError) as caught:
        serving_capacity(cfg, "dev.yaml")
    return caught.value


@pytest.mark.parametrize(
    "tp, extra, gpus",
    [
        (1, {}, 1),
        (2, {}, 2),
        (1, {"pipeline_parallel_size": 2}, 2),
        (1, {"data_parallel_size": 2}, 2),
        (2, {"pipeline_parallel_size": 2, "data_parallel_size": 2}, 8),
        (2, {"prefill_context_parallel_size": 2}, 4),
        (2, {"decode_context_parallel_size": 2}, 2),  # DCP reuses the TP ranks
        (1, {"data_parallel_size": 4, "data_parallel_size_local": 2}, 4),  # local is a part of DP, not a factor
        (2, {"data_parallel_size": 2, "enable_expert_parallel": True}, 4),  # EP reuses TP x DP
    ],
)
def test_gpus_per_replica_is_the_product_of_the_parallel_sizes(tp, extra, gpus):
    from config.derived import gpus_per_replica
    from config.schema import Engine

    assert gpus_per_replica(Engine().model_copy(update={"tensor_parallel_size": tp, "extra_args": extra})) == gpus


def test_every_parallel_size_vllm_knows_is_classified():
    """A new vLLM *_parallel_size field must be decided: a factor of the GPUs per replica, or not."""
    from config.derived import NOT_PARALLEL_FACTORS, PARALLEL_FACTORS
    from config.engine_args import recorded

    found = {name for name in recorded() if "parallel_size" in name}
    assert found == set(PARALLEL_FACTORS) | set(NOT_PARALLEL_FACTORS), found


@pytest.mark.parametrize(
    "extra, what",
    [
        ({"pipeline_parallel_size": 2}, "TP 1 x PP 2"),
        ({"data_parallel_size": 2}, "TP 1 x DP 2"),
        ({"prefill_context_parallel_size": 2}, "TP 1 x PCP 2"),
    ],
)
def test_parallel_sizes_beyond_tp_are_refused_by_capacity_on_one_gpu_nodes(dev, extra, what):
    # dev: two g6.8xlarge (one L4 each), one prefill and one decode replica: no replica to give back, so the
    # message names the node count
    error = _capacity_refusal(_parallel(dev, **extra))
    assert (error.field, error.problem) == (
        "gpu_nodegroup.count",
        (
            f"prefill + decode need up to 4 GPUs (2 replicas x {what}), the Ray cluster has 2 "
            "(2 x g6.8xlarge) (allowed: serving.mode: colocated, one engine for both phases, or GPU nodes for 4 GPUs)"
        ),
    )


@pytest.mark.parametrize("name", ["pipeline_parallel_size", "data_parallel_size", "prefill_context_parallel_size"])
def test_a_stage_file_with_them_is_refused_too(tmp_path, name):
    # by the capacity rule, or before it where the engine-argument rules keep the name out of extra_args
    line = _refusal(tmp_path, _engine(**{name: 2}))
    assert ": gpu_nodegroup.count: prefill + decode need up to 4 GPUs" in line or ": serving.engine.extra_args" in line


@pytest.mark.parametrize(
    "extra", [{"pipeline_parallel_size": 2}, {"data_parallel_size": 2}, {"prefill_context_parallel_size": 2}]
)
def test_with_enough_nodes_the_same_parallel_sizes_fit(dev, extra):
    from config.rules.serving_roles import serving_capacity

    assert serving_capacity(_parallel(dev, count=4, **extra), "dev.yaml") is None


def test_one_replica_bigger_than_the_cluster_names_its_parallel_size(dev):
    error = _capacity_refusal(_parallel(dev, count=1, pipeline_parallel_size=2))
    assert error.field == "serving.engine.extra_args.pipeline_parallel_size"
    assert error.problem.startswith("one replica needs 2 GPUs (TP 1 x PP 2), the Ray cluster has 1 (1 x g6.8xlarge)")


def test_autoscaling_counts_data_parallel_replicas(stages):
    # prod: four g6.8xlarge, prefill and decode 1-2 replicas each: with DP 2 the most is 8 GPUs
    error = _capacity_refusal(_parallel(stages["prod"], data_parallel_size=2))
    assert error.field == "serving.prefill"
    assert error.problem.startswith(
        "prefill + decode need up to 8 GPUs (4 replicas x TP 1 x DP 2), the Ray cluster has 4 (4 x g6.8xlarge)"
    )


def test_tp_units_stay_on_one_node(tmp_path):
    # two g6.12xlarge (4 L4 each), TP 4: one engine per node, so prefill 2 + decode 1 do not fit
    line = _refusal(
        tmp_path, merge(FOUR_L4, {"serving": {"engine": {"tensor_parallel_size": 4}, "prefill": {"replicas": 2}}})
    )
    assert ": serving.prefill: prefill + decode need up to 12 GPUs (3 replicas x TP 4), the Ray cluster has 8" in line


@pytest.mark.parametrize(
    "name, value",
    [
        ("pipeline_parallel_size", 0),
        ("pipeline_parallel_size", -1),
        ("data_parallel_size", 0),
        ("prefill_context_parallel_size", -2),
        ("data_parallel_size", True),
        ("pipeline_parallel_size", 2.0),
    ],
)
def test_a_parallel_size_that_is_not_a_whole_number_of_one_or_more_is_refused(dev, name, value):
    error = _capacity_refusal(_parallel(dev, **{name: value}))
    assert error.field == f"serving.engine.extra_args.{name}"
    assert error.problem == f"{value!r} (allowed: a whole number, 1 or more)"


def _with_source(cfg, source):
    return cfg.model_copy(
        update={
            "serving": cfg.serving.model_copy(update={"model": cfg.serving.model.model_copy(update={"source": source})})
        }
    )


def test_the_memory_floor_divides_by_pipeline_parallel_for_a_known_model(tmp_path):
    from config.derived import model_memory_floor

    # Qwen3.5-27B (51.7 GiB of weights) does not fit one L4 but fits four pipeline stages of one L4 each
    line = _refusal(tmp_path, merge(FOUR_L4, {"serving": {"model": {"source": "Qwen/Qwen3.5-27B"}}}))
    assert ": serving.model.source: Qwen/Qwen3.5-27B needs at least" in line
    (tmp_path / "pp").mkdir()
    cfg = _with_source(config_with(tmp_path / "pp", **FOUR_L4), "Qwen/Qwen3.5-27B")
    assert model_memory_floor(cfg).gpus == 1
    floor = model_memory_floor(_parallel(cfg, pipeline_parallel_size=4))
    assert floor.gpus == 4 and floor.available_gib == pytest.approx(4 * 24 * 0.9)
    assert floor.needed_gib < floor.available_gib


def test_data_parallel_copies_of_a_dense_model_each_need_the_whole_model(tmp_path):
    from config.derived import model_memory_floor

    # DP replicates the weights (vLLM, "Data Parallel Deployment"): TP 2 x DP 2 gives each copy two L4s,
    # too few for Qwen3.5-27B
    cfg = _with_source(config_with(tmp_path, **FOUR_L4), "Qwen/Qwen3.5-27B")
    floor = model_memory_floor(_parallel(cfg, tp=2, data_parallel_size=2))
    assert floor.gpus == 2 and floor.needed_gib > floor.available_gib


def test_the_memory_floor_of_a_model_that_may_be_moe_divides_by_the_whole_product(tmp_path):
    from config.derived import gpus_per_replica, model_memory_floor

    # an unknown 40B (36e9 counted, 67 GiB) may be a mixture of experts, whose experts vLLM shards over TP x DP
    cfg = _parallel(_with_source(config_with(tmp_path, **FOUR_L4), "my-org/House-40B"), tp=2, data_parallel_size=2)
    floor = model_memory_floor(cfg)
    assert floor.gpus == gpus_per_replica(cfg.serving.engine) == 4 and floor.needed_gib <= floor.available_gib
    assert model_memory_floor(_parallel(cfg, data_parallel_size=1)).gpus == 2


# --- 16. model sources the stack can load ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, phrase",
    [
        ("s3://my-bucket/models/qwen", "is an S3 URI, but no stack grants the Ray pods read access to S3"),
        ("s3://b/p", "no stack grants the Ray pods read access to S3"),
        ("/models/house-model", "is a local path"),
        ("/", "does not match"),
        ("./models", "is a local path"),
        ("../models", "is a local path"),
        ("./x/y", "does not match"),
        ("~/models", "does not match"),
        ("file:///models/x", "does not match"),
        ("https://huggingface.co/Qwen/Qwen3.5-9B", "does not match"),
        ("hf://Qwen/Qwen3.5-9B", "does not match"),
        ("gs://bucket/model", "does not match"),
        ("Qwen/Qwen3.5-9B/", "does not match"),
        ("a/b/c", "does not match"),
        ("Qwen3.5-9B", "does not match"),
        ("org/a--b", "is not a Hugging Face repo id"),
        ("org/a..b", "is not a Hugging Face repo id"),
        ("org/.hidden", "is not a Hugging Face repo id"),
        ("org/-x", "is not a Hugging Face repo id"),
        ("org/x-", "is not a Hugging Face repo id"),
        ("org/x.", "is not a Hugging Face repo id"),
        ("org/x.git", "is not a Hugging Face repo id"),
        (".org/x", "is not a Hugging Face repo id"),
        ("_org/x", "is not a Hugging Face repo id"),
        ("org/" + "a" * 97, "is not a Hugging Face repo id"),
        ("org/..", "is not a Hugging Face repo id"),
        ("../..", "is a local path"),
    ],
)
def test_a_model_source_the_pods_cannot_load_is_refused(tmp_path, source, phrase):
    line = _refusal(tmp_path, {"serving": {"model": {"source": source}}})
    assert ": serving.model.source: " in line and phrase in line


@pytest.mark.parametrize(
    "source",
    [
        "Qwen/Qwen3.5-9B",
        "meta-llama/Llama-3.1-8B-Instruct",
        "0-hero/OIG-small-chip2",
        "org_1/model.v2",
        "a/b",
        "my-org/house_model_",
        "org/" + "a" * 96,
    ],
)
def test_hugging_face_repo_ids_are_accepted_as_huggingface_hub_takes_them(tmp_path, source):
    # with a token secret: a gated repository (meta-llama's) is refused without one
    serving = {"model": {"source": source}, "hf_token_secret": "pd-inference/hf-token"}
    assert config_with(tmp_path, serving=serving).serving.model.source == source
    hub = pytest.importorskip("huggingface_hub.utils")
    hub.validate_repo_id(source)  # what the pod's download takes, too


def test_no_stack_grants_the_ray_pods_s3_access():
    """The s3:// refusal stands only while the Ray pods' role has no S3 grant: revisit it with one."""
    from ..helpers import ROOT

    text = (ROOT / "stacks" / "serving.py").read_text()
    assert "s3:" not in text.lower() and "grant_read" not in text


@pytest.mark.parametrize(
    "source",
    [
        "qwen/qwen3.5-9b",
        "QWEN/QWEN3.5-9B",
        "Qwen/qwen3.5-9B",
        "someone/Qwen3.5-9B-AWQ",
        "qwen/qwen3-next-80b-a3b-instruct",
    ],
)
def test_the_gdn_rule_finds_a_model_as_the_known_models_table_does(tmp_path, source):
    # p5 (H100) with the FlashInfer default: refused for every spelling the Hub resolves to a GDN model
    change = merge(
        P5,
        {
            "gpu_nodegroup": {"efa": False},
            "serving": {
                "kv_transfer_floor_gbps": 1,
                "model": {"source": source},
                "engine": {"gdn_prefill_backend": None, "tensor_parallel_size": 2},
            },
        },
    )
    assert ": serving.engine.gdn_prefill_backend: " in _refusal(tmp_path, change)


def test_one_normaliser_keys_the_known_models_and_the_gdn_models():
    from config.derived import KNOWN_MODELS
    from config.engine_args import GDN_MODEL_PREFIXES, is_gdn_model, model_key

    assert all(model_key(name) == name for name in KNOWN_MODELS)
    assert all(model_key(prefix) == prefix for prefix in GDN_MODEL_PREFIXES)
    assert model_key("QWEN/Qwen3.5-9B") == model_key("qwen/qwen3.5-9b") == "qwen3.5-9b" and "qwen3.5-9b" in KNOWN_MODELS
    assert (
        is_gdn_model("Qwen/Qwen3.5-9B")
        and is_gdn_model("qwen/QWEN3.5-27B")
        and not is_gdn_model("meta-llama/Llama-3.1-8B")
    )


def test_the_known_model_is_found_in_any_case(tmp_path):
    from config.derived import model_memory_floor

    cfg = config_with(tmp_path, serving={"model": {"source": "QWEN/QWEN3.5-9B"}})
    assert model_memory_floor(cfg).basis == "Qwen3.5-9B's config.json"


# --- a bool is no number ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        ({"serving": {"prefill": {"replicas": True}}}, "serving.prefill.replicas"),
        (
            {"serving": {"decode": {"replicas": None, "min_replicas": 1, "max_replicas": True}}},
            "serving.decode.max_replicas",
        ),
        ({"gpu_nodegroup": {"count": True}}, "gpu_nodegroup.count"),
        ({"serving": {"engine": {"tensor_parallel_size": True}}}, "serving.engine.tensor_parallel_size"),
        ({"serving": {"engine": {"gpu_memory_utilization": True}}}, "serving.engine.gpu_memory_utilization"),
        ({"serving": {"model": {"parameters_billion": True}}}, "serving.model.parameters_billion"),
        ({"observability": {"error_rate_percent": True}}, "observability.error_rate_percent"),
        ({"cluster": {"log_retention_days": True}}, "cluster.log_retention_days"),
        ({"cluster": {"log_retention_days": False}}, "cluster.log_retention_days"),
        ({"serving": {"engine": {"extra_args": {"max_num_partial_prefills": True}}}}, "serving.engine.extra_args"),
        ({"serving": {"engine": {"extra_args": {"pipeline_parallel_size": True}}}}, "serving.engine.extra_args"),
    ],
)
def test_true_is_refused_where_a_number_belongs(tmp_path, change, field):
    line = _refusal(tmp_path, change)
    assert f": {field}: " in line, line


def _numeric(annotation) -> bool:
    """Whether a field's annotation takes a number (int, float or a Literal of integers) and no bool."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _numeric(args[0])
    if origin is typing.Literal:
        return all(isinstance(a, int) and not isinstance(a, bool) for a in args)
    if origin is typing.Union:
        return any(_numeric(a) for a in args if a is not type(None)) and bool not in args
    return annotation in (int, float)


def _numeric_fields(model: type[BaseModel], prefix=()):
    for name, info in model.model_fields.items():
        annotation = info.annotation
        nested = [
            a for a in (annotation, *typing.get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)
        ]
        if nested and typing.get_origin(annotation) is not list:
            yield from _numeric_fields(nested[0], prefix + (name,))
        elif _numeric(annotation):
            yield prefix + (name,)


def test_every_numeric_field_of_the_schema_refuses_true(tmp_path):
    """Walks the whole schema, so a field added later is tried too."""
    from config.schema import StageConfig

    fields = list(_numeric_fields(StageConfig))
    assert len(fields) >= 25, fields
    for index, loc in enumerate(fields):
        change: dict = {loc[-1]: True}
        for part in reversed(loc[:-1]):
            change = {part: change}
        if loc[:2] in (("serving", "prefill"), ("serving", "decode")) and loc[-1] != "replicas":
            change = merge(change, {loc[0]: {loc[1]: {"replicas": None}}})
        (tmp_path / str(index)).mkdir()
        assert f": {'.'.join(loc)}: " in _refusal(tmp_path / str(index), change), loc


# --- cluster.admin_principal_arns: what an EKS access entry takes -------------------------------------------


@pytest.mark.parametrize(
    "arn, role",
    [
        ("arn:aws:sts::123456789012:assumed-role/PlatformAdmin/alice", "arn:aws:iam::123456789012:role/PlatformAdmin"),
        ("arn:aws:sts::123456789012:assumed-role/Admin/s-1", "arn:aws:iam::123456789012:role/Admin"),
        ("arn:aws:iam::123456789012:assumed-role/Admin/s", "arn:aws:iam::123456789012:role/Admin"),
    ],
)
def test_an_sts_session_is_refused_with_the_role_arn_to_use(tmp_path, arn, role):
    line = _refusal(tmp_path, {"cluster": {"admin_principal_arns": [arn], "allow_no_admin_principals": False}})
    assert ": cluster.admin_principal_arns[0]: " in line and "is an STS session principal" in line
    assert "EKS access entries refuse" in line and f"here {role}" in line


@pytest.mark.parametrize(
    "arn, phrase",
    [
        ("arn:aws:sts::123456789012:federated-user/bob", "does not match"),  # the schema's pattern already
        ("arn:aws:sts::123456789012:role/Admin", "is not an IAM role or user ARN"),
        ("arn:aws:sts::123456789012:user/bob", "is not an IAM role or user ARN"),
    ],
)
def test_other_principals_an_access_entry_cannot_take_are_refused(tmp_path, arn, phrase):
    line = _refusal(tmp_path, {"cluster": {"admin_principal_arns": [arn], "allow_no_admin_principals": False}})
    assert ": cluster.admin_principal_arns[0]: " in line and phrase in line


@pytest.mark.parametrize(
    "arn, problem",
    [
        ("arn:aws:iam::123456789012:role/ops/", "names no role after its path '/ops/'"),
        ("arn:aws:iam::123456789012:user/team/", "names no user after its path '/team/'"),
        ("arn:aws:iam::123456789012:role/" + "a" * 65, "has a role name of 65 characters, more than IAM's 64"),
        ("arn:aws:iam::123456789012:user/p/" + "b" * 100, "has a user name of 100 characters, more than IAM's 64"),
        ("arn:aws:iam::123456789012:role//Admin", "has an empty segment in its path '//'"),
        ("arn:aws:iam::123456789012:role/a//b/Admin", "has an empty segment in its path '/a//b/'"),
        ("arn:aws:iam::123456789012:role/" + "p/" * 300 + "Admin", "has a path of 601 characters, more than IAM's 512"),
    ],
)
def test_a_principal_iam_cannot_hold_is_refused_by_why(tmp_path, arn, problem):
    line = _refusal(tmp_path, {"cluster": {"admin_principal_arns": [arn], "allow_no_admin_principals": False}})
    assert ": cluster.admin_principal_arns[0]: " in line and f" {problem}: no such principal can exist" in line, line


def test_one_principal_twice_is_refused(tmp_path):
    arns = ["arn:aws:iam::123456789012:role/Admin", "arn:aws:iam::123456789012:role/admin"]
    line = _refusal(tmp_path, {"cluster": {"admin_principal_arns": arns, "allow_no_admin_principals": False}})
    assert ": cluster.admin_principal_arns[1]: " in line and "is listed twice" in line


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:role/PlatformAdmin",
        "arn:aws:iam::123456789012:role/a/b/Admin",
        "arn:aws:iam::123456789012:user/alice",
        "arn:aws:iam::123456789012:role/" + "a" * 64,  # IAM's longest name
        "arn:aws:iam::123456789012:user/service/ci+deploy=x,y.z@corp-1",
    ],
)
def test_iam_roles_and_users_are_accepted(tmp_path, arn):
    cfg = config_with(tmp_path, cluster={"admin_principal_arns": [arn], "allow_no_admin_principals": False})
    assert cfg.cluster.admin_principal_arns == [arn]


# --- the validator: exit 2 and one line, for each class ---------------------------------------------------------


@pytest.mark.parametrize(
    "change, field",
    [
        ({"serving": {"weight_cache": {"host_path": "/data/model-cache"}}}, "serving.weight_cache.host_path"),
        ({"serving": {"weight_cache": {"mount_path": "/tmp/ray"}}}, "serving.weight_cache.mount_path"),
        ({"serving": {"namespace": "amazon-cloudwatch"}}, "serving.namespace"),
        ({"serving": {"prefill": {"replicas": 2}, "decode": {"replicas": 2}}}, "serving.prefill"),
        ({"serving": {"model": {"source": "s3://bucket/model"}}}, "serving.model.source"),
        ({"cluster": {"log_retention_days": True}}, "cluster.log_retention_days"),
        (
            {
                "cluster": {
                    "admin_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Admin/me"],
                    "allow_no_admin_principals": False,
                }
            },
            "cluster.admin_principal_arns[0]",
        ),
    ],
)
def test_the_validator_refuses_with_exit_2_and_one_line(tmp_path, capsys, change, field):
    from config.__main__ import main

    path = write_stage(tmp_path, merge(stage_data("dev"), change), name="dev")
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith(f"{path}: {field}: ")
