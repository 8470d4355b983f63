"""The inference chart: the RayService of docs/SERVICE.md, one test per reference point, validated
strictly against KubeRay 1.6.2's CRD and, for plain objects and the pod templates, Kubernetes 1.35."""

from __future__ import annotations

import dataclasses

import cdk8s
import kubernetes_validate
import pytest
import yaml

from charts.inference import ChartProps, InferenceChart, render
from charts.serve_config import build_serve_config
from config.derived import worker_resources

from ..helpers import config_with
from .validators import crd_errors

K8S_VERSION = "1.35.0"


def chart_props(cfg, **changes) -> ChartProps:
    """The props stacks/stage.py builds for the stage, with `changes` over them."""
    props = ChartProps(
        serving=cfg.serving,
        serve_config=build_serve_config(cfg.serving),
        image=cfg.image,
        region=cfg.region,
        worker_resources=worker_resources(cfg),
        worker_count=cfg.gpu_nodegroup.count,
        api_proxy_cidrs=["10.0.192.0/28", "10.0.192.16/28"],
    )
    return dataclasses.replace(props, **changes)


def chart_objects(cfg, **changes) -> list[dict]:
    return render(InferenceChart(cdk8s.App(), "inference", props=chart_props(cfg, **changes)))


def by_kind(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1
    return found[0]


@pytest.fixture(scope="module")
def dev_objects(dev):
    return chart_objects(dev)


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    """Stage variants the chart must render validly too."""
    tmp = tmp_path_factory.mktemp("variants")
    made = {}
    for name, change in {
        "colocated": {"serving": {"mode": "colocated"}},
        "prod-colocated": ("prod", {"serving": {"mode": "colocated"}}),
        "ipc-lock": {"serving": {"worker_privilege": "ipc_lock"}},
        "with-token": {"serving": {"hf_token_secret": "hf/token"}},
        "no-cache": {"serving": {"weight_cache": {"enabled": False}}},
        "no-kernel-cache": {"serving": {"weight_cache": {"kernels": False}}},
        "serve-proxy": {"serving": {"serve_ingress": "serve_proxy"}},
    }.items():
        (tmp / name).mkdir()
        stage, change = change if isinstance(change, tuple) else ("dev", change)
        made[name] = config_with(tmp / name, stage, **change)
    return made


def ray_service(objects):
    return by_kind(objects, "RayService")


def head(objects):
    return ray_service(objects)["spec"]["rayClusterConfig"]["headGroupSpec"]


def workers(objects):
    (group,) = ray_service(objects)["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    return group


def container(group):
    (one,) = group["template"]["spec"]["containers"]
    return one


def env(group):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(group)["env"]}


# --- schemas ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_rayservice_validates_strictly_against_the_kuberay_crd(stages, stage):
    assert crd_errors(ray_service(chart_objects(stages[stage]))) == []


@pytest.mark.parametrize("variant", ["colocated", "prod-colocated", "ipc-lock", "with-token", "no-cache"])
def test_variants_validate_strictly_against_the_kuberay_crd(variants, variant):
    assert crd_errors(ray_service(chart_objects(variants[variant]))) == []


def test_strict_crd_check_rejects_a_misspelt_field(dev_objects):
    broken = yaml.safe_load(yaml.safe_dump(ray_service(dev_objects)))
    broken["spec"]["rayClusterConfig"]["headGroupSpec"]["rayStartParam"] = {}
    broken["spec"]["serviceUnhealthySecondThresold"] = 5
    assert len(crd_errors(broken)) == 2


@pytest.mark.parametrize("variant", [None, "with-token"])
def test_plain_objects_validate_for_kubernetes_1_35_strict(dev_objects, variants, variant):
    objects = dev_objects if variant is None else chart_objects(variants[variant])
    for obj in objects:
        if obj["apiVersion"] in ("v1", "apps/v1", "networking.k8s.io/v1"):
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("variant", [None, "ipc-lock", "with-token"])
def test_head_and_worker_templates_validate_as_pods(dev_objects, variants, variant):
    objects = dev_objects if variant is None else chart_objects(variants[variant])
    for group in (head(objects), workers(objects)):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "check"}, **group["template"]}
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


def test_no_deprecated_kuberay_fields(dev_objects):
    spec = ray_service(dev_objects)["spec"]
    assert "serviceUnhealthySecondThreshold" not in spec
    assert "deploymentUnhealthySecondThreshold" not in spec


# --- the reference deployment, point by point ---------------------------------------------------------


def test_rayservice_is_ray_llm_in_namespace_inference(dev_objects):
    assert ray_service(dev_objects)["metadata"] == {"name": "ray-llm", "namespace": "inference"}


def test_ray_version_equals_the_images(dev_objects, dev):
    assert ray_service(dev_objects)["spec"]["rayClusterConfig"]["rayVersion"] == "2.58.0"
    assert dev.image == "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray:serve-llm-cuda-v1.0.0"
    assert {container(g)["image"] for g in (head(dev_objects), workers(dev_objects))} == {dev.image}


def test_upgrade_strategy_is_explicit(dev_objects):
    assert ray_service(dev_objects)["spec"]["upgradeStrategy"] == {"type": "None"}


def test_serve_config_is_the_one_handed_in_embedded_as_yaml(dev):
    handed = {"applications": [{"name": "handed-in", "route_prefix": "/"}]}
    objects = chart_objects(dev, serve_config=handed)
    assert yaml.safe_load(ray_service(objects)["spec"]["serveConfigV2"]) == handed


def test_head_start_params(dev_objects):
    assert head(dev_objects)["rayStartParams"] == {"num-gpus": "0", "dashboard-host": "0.0.0.0"}


def test_head_runs_on_the_system_node(dev_objects):
    assert head(dev_objects)["template"]["spec"]["nodeSelector"] == {"role": "system"}


def test_head_ports(dev_objects):
    ports = {p["containerPort"] for p in container(head(dev_objects))["ports"]}
    assert ports == {6379, 8265, 8000}


def test_head_resources(dev_objects):
    assert container(head(dev_objects))["resources"] == {
        "requests": {"cpu": "2", "memory": "8Gi", "ephemeral-storage": "8Gi"},
        "limits": {"cpu": "3", "memory": "12Gi"},
    }


def test_head_hides_gpus(dev_objects):
    assert env(head(dev_objects))["NVIDIA_VISIBLE_DEVICES"] == "void"


def test_one_worker_group_of_two_fixed_replicas(dev_objects):
    group = workers(dev_objects)
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 2, 2)


def test_worker_start_params(dev_objects):
    assert workers(dev_objects)["rayStartParams"] == {"num-gpus": "1"}


def test_worker_gpu_and_efa_requests_equal_limits(dev_objects):
    resources = container(workers(dev_objects))["resources"]
    for name in ("nvidia.com/gpu", "vpc.amazonaws.com/efa"):
        assert resources["requests"][name] == resources["limits"][name] == "1"


def test_worker_cpu_and_memory(dev_objects):
    resources = container(workers(dev_objects))["resources"]
    assert (resources["requests"]["cpu"], resources["limits"]["cpu"]) == ("8", "16")
    assert (resources["requests"]["memory"], resources["limits"]["memory"]) == ("32Gi", "64Gi")


def test_worker_is_privileged_by_default(dev_objects):
    assert container(workers(dev_objects))["securityContext"] == {"privileged": True}


def test_ipc_lock_mode_adds_only_that_capability(variants):
    group = workers(chart_objects(variants["ipc-lock"]))
    assert container(group)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
        "runAsUser": 0,  # an added capability is effective only for root (charts/ray_pods.py)
    }


def test_dev_shm_is_an_8gi_memory_volume(dev_objects):
    group = workers(dev_objects)
    volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container(group)["volumeMounts"]


@pytest.mark.parametrize("group", [head, workers])
def test_ray_tmp_is_a_bounded_volume_the_ray_container_requests(dev_objects, group):
    made = group(dev_objects)
    volumes = {v["name"]: v for v in made["template"]["spec"]["volumes"]}
    assert volumes["ray-logs"] == {"name": "ray-logs", "emptyDir": {"sizeLimit": "8Gi"}}
    assert {"name": "ray-logs", "mountPath": "/tmp/ray"} in container(made)["volumeMounts"]
    assert container(made)["resources"]["requests"]["ephemeral-storage"] == "8Gi"


@pytest.mark.parametrize("group", [head, workers])
def test_ray_rotates_its_logs_under_the_bound(dev_objects, group):
    values = env(group(dev_objects))
    assert (values["RAY_ROTATION_MAX_BYTES"], values["RAY_ROTATION_BACKUP_COUNT"]) == (str(16 * 2**20), "2")


def test_worker_environment(dev_objects):
    values = env(workers(dev_objects))
    assert values["FI_PROVIDER"] == "efa"
    assert values["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"
    assert values["VLLM_HOST_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_efa_workers_keep_libfabric_off_huge_pages(dev_objects, tmp_path):
    # the container requests no hugepages-2Mi, so its hugetlb limit is 0 (docs/DECISIONS.md, "What EFA needs in
    # the pod"); without EFA there is no efa provider to tell
    assert env(workers(dev_objects))["FI_EFA_USE_HUGE_PAGE"] == "0"
    resources = container(workers(dev_objects))["resources"]
    assert not [name for name in (*resources["requests"], *resources["limits"]) if name.startswith("hugepages")]
    no_efa = config_with(tmp_path, gpu_nodegroup={"efa": False}, serving={"kv_transfer_floor_gbps": 1})
    assert "FI_EFA_USE_HUGE_PAGE" not in env(workers(chart_objects(no_efa)))


SERVE_INGRESS_VARIABLES = ("RAY_SERVE_ENABLE_HA_PROXY", "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING")


@pytest.mark.parametrize("group", [head, workers], ids=["head", "workers"])
def test_serves_own_proxy_sets_no_serve_ingress_variable(variants, group):
    assert not set(SERVE_INGRESS_VARIABLES) & set(env(group(chart_objects(variants["serve-proxy"]))))


@pytest.mark.parametrize("group", [head, workers], ids=["head", "workers"])
@pytest.mark.parametrize("mode", ["pd", "colocated"])
def test_haproxy_sets_haproxy_and_direct_streaming_on_every_ray_pod(dev_objects, variants, group, mode):
    objects = dev_objects if mode == "pd" else chart_objects(variants["colocated"])
    found = env(group(objects))
    assert {name: found.get(name) for name in SERVE_INGRESS_VARIABLES} == dict.fromkeys(SERVE_INGRESS_VARIABLES, "1")


def test_nixl_logs_at_info_so_the_provider_line_appears(dev_objects):
    assert env(workers(dev_objects))["NIXL_LOG_LEVEL"] == "INFO"


def test_workers_tolerate_the_gpu_taint_and_select_gpu_nodes(dev_objects):
    spec = workers(dev_objects)["template"]["spec"]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert spec["nodeSelector"] == {"role": "gpu-worker"}


@pytest.mark.parametrize("group", [head, workers])
def test_pre_stop_runs_ray_stop(dev_objects, group):
    assert container(group(dev_objects))["lifecycle"]["preStop"]["exec"]["command"][-1] == "ray stop"


def test_weight_cache_is_a_host_path_on_the_gpu_node_with_hf_home_on_it(dev_objects):
    group = workers(dev_objects)
    volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
    assert volumes["model-cache"]["hostPath"] == {"path": "/var/lib/model-cache", "type": "DirectoryOrCreate"}
    assert {"name": "model-cache", "mountPath": "/model-cache"} in container(group)["volumeMounts"]
    assert env(group)["HF_HOME"] == "/model-cache/huggingface"


def test_weight_cache_can_be_turned_off(variants):
    group = workers(chart_objects(variants["no-cache"]))
    assert "model-cache" not in {v["name"] for v in group["template"]["spec"]["volumes"]}
    assert "HF_HOME" not in env(group) and "TRITON_CACHE_DIR" not in env(group)


def test_compiled_kernels_are_kept_beside_the_weights_each_under_its_own_variable(dev_objects):
    found = {
        name: value for name, value in env(workers(dev_objects)).items() if str(value).startswith("/model-cache/k")
    }
    assert found == {
        "TRITON_CACHE_DIR": "/model-cache/kernels/triton",
        "VLLM_CACHE_ROOT": "/model-cache/kernels/vllm",
        "TORCHINDUCTOR_CACHE_DIR": "/model-cache/kernels/inductor",
        "FLASHINFER_WORKSPACE_BASE": "/model-cache/kernels/flashinfer",
    }


def test_the_kernel_cache_can_be_turned_off_keeping_the_weights(variants):
    group = workers(chart_objects(variants["no-kernel-cache"]))
    assert env(group)["HF_HOME"] == "/model-cache/huggingface"
    assert not {"TRITON_CACHE_DIR", "VLLM_CACHE_ROOT", "FLASHINFER_WORKSPACE_BASE"} & set(env(group))


def test_colocated_mode_runs_on_the_same_nodes(dev_objects, variants):
    colocated = chart_objects(variants["colocated"])
    # the same pods, less NIXL's exporter (tests/charts/test_nixl_exporter.py): colocated engines move no KV cache
    pd_workers = workers(dev_objects)
    pd_container = dict(container(pd_workers))
    del pd_container["ports"]
    pd_container["env"] = [e for e in pd_container["env"] if not e["name"].startswith("NIXL_TELEMETRY")]
    assert container(workers(colocated)) == pd_container
    assert {k: v for k, v in workers(colocated).items() if k != "template"} == {
        k: v for k, v in pd_workers.items() if k != "template"
    }
    colocated_spec, pd_spec = workers(colocated)["template"]["spec"], pd_workers["template"]["spec"]
    assert {k: v for k, v in colocated_spec.items() if k != "containers"} == {
        k: v for k, v in pd_spec.items() if k != "containers"
    }
    assert head(colocated) == head(dev_objects)
    assert "build_openai_app" in ray_service(colocated)["spec"]["serveConfigV2"]


# --- namespace, service account, token -----------------------------------------------------------------


def test_namespace_admits_privileged_pods_and_warns_at_baseline(dev_objects):
    labels = by_kind(dev_objects, "Namespace")["metadata"]["labels"]
    assert labels == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "pod-security.kubernetes.io/warn": "baseline",
        "pod-security.kubernetes.io/audit": "baseline",
    }


def test_ray_pods_do_not_mount_a_service_account_token(dev_objects):
    assert by_kind(dev_objects, "ServiceAccount")["automountServiceAccountToken"] is False
    for group in (head(dev_objects), workers(dev_objects)):
        assert group["template"]["spec"]["automountServiceAccountToken"] is False


def test_no_token_objects_without_a_secret(dev_objects):
    assert not [o for o in dev_objects if o["kind"] in ("SecretProviderClass", "Secret")]
    assert "HF_TOKEN_PATH" not in env(workers(dev_objects))


def test_token_is_a_csi_mounted_file_named_by_hf_token_path(variants):
    objects = chart_objects(variants["with-token"])
    assert not [o for o in objects if o["kind"] == "Secret"]  # never a k8s Secret literal
    provider = by_kind(objects, "SecretProviderClass")
    assert provider["spec"]["provider"] == "aws"
    assert provider["spec"]["parameters"]["usePodIdentity"] == "true"
    assert yaml.safe_load(provider["spec"]["parameters"]["objects"]) == [
        {"objectName": "hf/token", "objectType": "secretsmanager", "objectAlias": "token"}
    ]
    for group in (head(objects), workers(objects)):
        assert env(group)["HF_TOKEN_PATH"] == "/var/run/secrets/huggingface/token"
        volumes = {v["name"]: v for v in group["template"]["spec"]["volumes"]}
        assert volumes["hf-token"]["csi"] == {
            "driver": "secrets-store.csi.k8s.io",
            "readOnly": True,
            "volumeAttributes": {"secretProviderClass": "ray-llm-hf-token"},
        }


def test_verify_group_may_read_nodes_cluster_wide_only(dev_objects):
    role = by_kind(dev_objects, "ClusterRole")
    binding = by_kind(dev_objects, "ClusterRoleBinding")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "pd-inference-verify",
    }
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "pd-inference-verify"}
    ]


def _roles(objects):
    return {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"}


def test_verify_group_reads_exactly_the_operator_deployment_in_its_namespace(dev_objects):
    assert _roles(dev_objects)["kuberay-system"]["rules"] == [
        {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["kuberay-operator"], "verbs": ["get"]}
    ]


def test_verify_group_posts_only_to_the_serve_port_and_reads_the_dashboard(dev_objects):
    # POST through the proxy reaches whatever listens on the port: the dashboard's job API would run code on
    # the workers, so only Serve's port takes a POST (verify's chat completion).
    assert _roles(dev_objects)["inference"]["rules"] == [
        {"apiGroups": ["ray.io"], "resources": ["rayservices"], "resourceNames": ["ray-llm"], "verbs": ["get"]},
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["ray-llm-head-svc:dashboard", "ray-llm-serve-svc:serve"],
            "verbs": ["get"],
        },
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["ray-llm-serve-svc:serve"],
            "verbs": ["create"],
        },
        # the rate check (ops/verify_rate.py): the workers' names are generated, so no resourceNames; GET only
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]},
    ]


def test_each_verify_role_is_bound_to_the_verify_group_in_its_namespace(dev_objects):
    bindings = {o["metadata"]["namespace"]: o for o in dev_objects if o["kind"] == "RoleBinding"}
    assert set(bindings) == {"kuberay-system", "inference"}
    for binding in bindings.values():
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "pd-inference-verify",
        }
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "pd-inference-verify"}
        ]


def test_nothing_in_the_chart_needs_imds_under_hop_limit_1(variants):
    # The launch templates set the IMDS hop limit to 1 (SECURITY.md, "Instance metadata"): no pod outside
    # the host network can reach IMDS. The secret provider must therefore name its region and use Pod
    # Identity, and no Ray pod may take the host network (which would reach the node role again).
    objects = chart_objects(variants["with-token"])
    provider = by_kind(objects, "SecretProviderClass")
    assert provider["spec"]["parameters"]["region"] == variants["with-token"].region
    assert provider["spec"]["parameters"]["usePodIdentity"] == "true"
    for group in (head(objects), workers(objects)):
        assert "hostNetwork" not in group["template"]["spec"]
