"""Rules of the `serving` section's own keys (docs/STAGE_FILE.md): the image, the KV transport, the Hugging Face
token secret, the serving namespace and the client namespaces."""

from __future__ import annotations

import re

from .. import versions
from ..derived import gpu_spec
from ..errors import ConfigError, short
from ..image_reference import image_problem
from ..schema import StageConfig
from ..topology import CLOUDWATCH_NAMESPACE, KUBERAY_NAMESPACE
from .top_level import same_region_and_account


def image_reference(cfg: StageConfig, path: str) -> None:
    serving = cfg.serving
    if serving.image is None and not versions.DLC_REGISTRIES.get(cfg.region):
        raise ConfigError(
            path,
            "region",
            f"{cfg.region} has no registry of the Ray Serve LLM Deep Learning Container (config/dlc_registries.json) "
            f"(allowed: a region listed there, or serving.image naming an image you host)",
        )
    problem = None if serving.image is None else image_problem(serving.image)
    if problem:
        raise ConfigError(
            path,
            "serving.image",
            f"{short(serving.image, 80)} {problem} (allowed: [registry[:port]/]lower-case/path:tag or "
            "...@sha256:<64 hex digits>, a tag other than latest, e.g. 123456789012.dkr.ecr.us-west-2."
            "amazonaws.com/ray:serve-llm-cuda-v1.0.0)",
        )
    _serving_model_id(cfg, path)
    tag = cfg.image.rsplit(":", 1)[-1] if ":" in cfg.image.rsplit("/", 1)[-1] else ""
    image_ray = versions.DLC_RAY_VERSIONS.get(tag)
    if image_ray is not None and image_ray != serving.ray_version:
        raise ConfigError(
            path,
            "serving.ray_version",
            f"{serving.ray_version} differs from the image's Ray {image_ray} (allowed: {image_ray} for tag {tag})",
        )


def _serving_model_id(cfg: StageConfig, path: str) -> None:
    """Ray Serve LLM reads `base:adapter` in a model id (ray.llm._internal.serve lora utils, get_base_model_id:
    model_id.split(":")[0]), so an id with ':' would route to a LoRA adapter that does not exist."""
    model_id = cfg.serving.model.id
    if ":" in model_id:
        raise ConfigError(
            path,
            "serving.model.id",
            f"{short(model_id, 80)} has a ':', which Ray Serve LLM reads as base-model:LoRA-adapter (allowed: "
            "letters, digits, '.', '_' and '-')",
        )


def kv_transport(cfg: StageConfig, path: str) -> None:
    if cfg.gpu_nodegroup.efa and cfg.serving.kv_backend != "LIBFABRIC":
        raise ConfigError(
            path,
            "serving.kv_backend",
            f"{cfg.serving.kv_backend} on EFA runs at TCP speed: NIXL's UCX backend does not "
            "use EFA (allowed: LIBFABRIC when gpu_nodegroup.efa is true)",
        )


def kv_transfer_floor(cfg: StageConfig, path: str) -> None:
    """PD without EFA has no bandwidth fact to derive a floor from; colocated mode moves no KV cache; a floor
    above one EFA interface's bandwidth could never pass."""
    serving, field = cfg.serving, "serving.kv_transfer_floor_gbps"
    floor = serving.kv_transfer_floor_gbps
    if serving.mode != "pd":
        if floor is not None:
            raise ConfigError(path, field, "colocated mode moves no KV cache between engines (allowed: unset)")
        return
    if floor is None and not cfg.gpu_nodegroup.efa:
        raise ConfigError(
            path,
            field,
            "required with gpu_nodegroup.efa false: there is no EFA bandwidth to derive the KV transfer's floor from "
            "(allowed: the lowest acceptable rate in Gbps, e.g. what `ops rehearse` measured on these nodes)",
        )
    limit = gpu_spec(cfg).efa_interface_gbps
    if floor is not None and cfg.gpu_nodegroup.efa and floor > limit:
        raise ConfigError(
            path,
            field,
            f"{floor:g} Gbps is above one EFA interface of {cfg.gpu_nodegroup.instance_type} ({limit:g} Gbps), so no "
            f"transfer could pass (allowed: at most {limit:g})",
        )


def hf_token_secret(cfg: StageConfig, path: str) -> None:
    ref = cfg.serving.hf_token_secret
    if ref and ref.startswith("arn:"):
        same_region_and_account(
            cfg,
            path,
            "serving.hf_token_secret",
            ref,
            what="secret",
            allowed_region=f"a secret in {cfg.region}",
            allowed_account=f"a secret in {cfg.account}",
        )


def client_namespaces(cfg: StageConfig, path: str) -> None:
    """Client namespaces get port 8000 of the Ray pods. The serving namespace itself is refused (its only
    pods are the Ray pods, which already reach each other: listing it reads as if it did something). Any
    other namespace, kube-system included, is allowed: some clusters run their ingress or gateway proxy
    there, and the rule opens only Serve's port."""
    serving = cfg.serving
    for index, name in enumerate(serving.client_namespaces):
        if name == serving.namespace:
            raise ConfigError(
                path,
                f"serving.client_namespaces[{index}]",
                f"{name} is the serving namespace itself: its Ray pods already reach each other "
                "(allowed: the namespaces of the clients, e.g. gateway)",
            )
        if name in serving.client_namespaces[:index]:
            raise ConfigError(path, f"serving.client_namespaces[{index}]", f"{name} is listed twice (each once)")


# --- serving.namespace --------------------------------------------------------------------------------------
# `cdk destroy` deletes the serving namespace with everything in it, so it is never Kubernetes' own or one where
# this app's add-ons run; tests/config/test_workload_rules.py checks the lists against the stacks.
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".
KUBERNETES_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
APP_NAMESPACES = {
    "kube-system": "the device plugins' Helm releases and the EKS add-ons",
    KUBERAY_NAMESPACE: "the KubeRay operator's namespace (its Helm release)",
    CLOUDWATCH_NAMESPACE: "the CloudWatch Observability add-on's namespace",
}
RESERVED_PREFIX = "kube-"
# AWS installs its own agents into namespaces of these prefixes, by add-on or by console (GuardDuty's runtime
# agent amazon-guardduty, Network Flow Monitor amazon-network-flow-monitor, Fargate logging aws-observability,
# CloudWatch amazon-cloudwatch): a stage that took one would relabel it privileged, deny its ingress and delete
# it on destroy. The prefix is the class; no list of today's agents would stay complete.
AWS_PREFIXES = ("amazon-", "aws-")
# A namespace is a DNS-1123 label (Kubernetes: at most 63 lower-case letters, digits and '-', starting and
# ending with a letter or digit); the schema's K8S_NAME pattern already holds it to that, this is the rule's own.
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def serving_namespace(cfg: StageConfig, path: str) -> None:
    name = cfg.serving.namespace
    field = "serving.namespace"
    consequence = "the serving stack creates its namespace, denies ingress to every pod in it and deletes it on destroy"
    allowed = (
        f"a namespace of its own, e.g. inference; not default, kube-*, amazon-* or aws-*, nor "
        f"{', '.join(sorted(n for n in APP_NAMESPACES if not n.startswith((RESERVED_PREFIX, *AWS_PREFIXES))))}"
    )
    if not DNS_LABEL.fullmatch(name):
        raise ConfigError(
            path,
            field,
            f"{short(name, 70)} is not a DNS-1123 label (allowed: at most 63 lower-case "
            "letters, digits and '-', starting and ending with a letter or digit)",
        )
    if name in KUBERNETES_NAMESPACES or name.startswith(RESERVED_PREFIX):
        raise ConfigError(path, field, f"{name} is a Kubernetes system namespace: {consequence} (allowed: {allowed})")
    if name.startswith(AWS_PREFIXES) and name not in APP_NAMESPACES:
        raise ConfigError(
            path,
            field,
            f"{name} is in a namespace class AWS installs its agents into (amazon-*, aws-*): {consequence} "
            f"(allowed: {allowed})",
        )
    if name in APP_NAMESPACES:
        raise ConfigError(
            path,
            field,
            f"{name} is {APP_NAMESPACES[name]}, which this app installs: {consequence}, "
            f"taking the add-on with it (allowed: {allowed})",
        )


def unused_stream_batching(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when serving.stream_batching_ms is set where no stream Batcher runs: colocated under HAProxy,
    each replica serves vLLM's own OpenAI app (charts/serve_ingress.py)."""
    serving = cfg.serving
    if serving.stream_batching_ms is None or serving.mode != "colocated" or serving.serve_ingress != "haproxy":
        return None
    return (
        "serving.stream_batching_ms",
        (
            f"{serving.stream_batching_ms} has no effect: colocated under serve_ingress haproxy, vLLM's own server "
            "sends each token as it comes (remove it, or use serve_ingress serve_proxy)"
        ),
    )
