"""The Ray head and GPU worker pod templates, as plain dicts (shared by the chart and the scanners)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.derived import PodResources
from config.schema import HeadResources, WeightCache
from config.topology import EFA_RESOURCE, GPU_LABELS, GPU_RESOURCE, GPU_TOLERATION, HEAD_PORTS, SYSTEM_LABELS

from .log_relay import ray_logs_mount, ray_logs_volume, relay_container

PRE_STOP = {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}
TOKEN_DIR = "/var/run/secrets/huggingface"
TOKEN_FILE = "token"


@dataclass(frozen=True)
class TokenMount:
    """The Hugging Face token as a file, mounted by the Secrets Store CSI driver (never a k8s Secret)."""

    secret_provider_class: str

    @property
    def path(self) -> str:
        return f"{TOKEN_DIR}/{TOKEN_FILE}"


def _gib(value: int) -> str:
    return f"{value}Gi"


def _token_parts(token: TokenMount | None) -> tuple[list, list, list]:
    """(env, volumeMounts, volumes) for the token file, empty when no secret is configured."""
    if token is None:
        return [], [], []
    return (
        [{"name": "HF_TOKEN_PATH", "value": token.path}],
        [{"name": "hf-token", "mountPath": TOKEN_DIR, "readOnly": True}],
        [
            {
                "name": "hf-token",
                "csi": {
                    "driver": "secrets-store.csi.k8s.io",
                    "readOnly": True,
                    "volumeAttributes": {"secretProviderClass": token.secret_provider_class},
                },
            }
        ],
    )


POD_SECURITY = {"seccompProfile": {"type": "RuntimeDefault"}}
PART_OF = "app.kubernetes.io/part-of"


def ray_pod_labels(service_name: str) -> dict[str, str]:
    """On every Ray pod of the service: what the network policies select."""
    return {PART_OF: service_name}


def head_pod(
    *, image: str, resources: HeadResources, service_account: str, token: TokenMount | None, labels: dict[str, str]
) -> dict[str, Any]:
    """On the system node: no GPU there, so NVIDIA_VISIBLE_DEVICES=void keeps the NVIDIA runtime out."""
    env, mounts, volumes = _token_parts(token)
    container = {
        "name": "ray-head",
        "image": image,
        "ports": [{"name": name, "containerPort": port} for name, port in HEAD_PORTS.items()],
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}, *env],
        "resources": {
            "requests": {"cpu": str(resources.cpu_request), "memory": _gib(resources.memory_request_gib)},
            "limits": {"cpu": str(resources.cpu_limit), "memory": _gib(resources.memory_limit_gib)},
        },
        "lifecycle": {"preStop": PRE_STOP},
        # The head needs no privilege: no escalation, no capabilities (it runs as the image's user).
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    if mounts:
        container["volumeMounts"] = mounts
    spec: dict[str, Any] = {
        "serviceAccountName": service_account,
        "automountServiceAccountToken": False,
        "securityContext": dict(POD_SECURITY),
        "nodeSelector": dict(SYSTEM_LABELS),
        "containers": [container],
    }
    if volumes:
        spec["volumes"] = volumes
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def worker_security_context(privilege: str) -> dict[str, Any]:
    """NIXL registers GPU memory with the EFA device: that needs either a privileged container or,
    on some deployments, only the IPC_LOCK capability (pinned memory)."""
    if privilege == "privileged":
        return {"privileged": True}
    return {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}


POD_IP = {"fieldRef": {"fieldPath": "status.podIP"}}


def worker_environment(*, efa: bool) -> list[dict[str, Any]]:
    """The engine's environment on a GPU worker: the pod template's `env`, and what `ops rehearse`
    gives the engines on a single host (one source, so the two cannot drift)."""
    env: list[dict[str, Any]] = [
        {"name": "VLLM_HOST_IP", "valueFrom": POD_IP},
        # vLLM's NIXL worker asserts this layout for Qwen3.5's state (GDN) layers.
        {"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"},
        # INFO makes NIXL log "Created <N> rails using provider=efa": the only proof EFA is used.
        {"name": "NIXL_LOG_LEVEL", "value": "INFO"},
    ]
    if efa:
        env.insert(0, {"name": "FI_PROVIDER", "value": "efa"})
    return env


def worker_pod(
    *,
    image: str,
    resources: PodResources,
    privilege: str,
    weight_cache: WeightCache,
    service_account: str,
    token: TokenMount | None,
    labels: dict[str, str],
    log_relay: bool = False,
) -> dict[str, Any]:
    """One per GPU node, holding all its GPUs and EFA interfaces. `log_relay`: a second container prints
    NIXL's transport lines from Ray's log files to the container log (charts/log_relay.py)."""
    devices = {GPU_RESOURCE: str(resources.gpus)}
    if resources.efa_interfaces:
        devices[EFA_RESOURCE] = str(resources.efa_interfaces)
    env = worker_environment(efa=bool(resources.efa_interfaces))
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _gib(resources.shm_gib)}},
    ]
    if weight_cache.enabled:
        env.append({"name": "HF_HOME", "value": f"{weight_cache.mount_path}/huggingface"})
        mounts.append({"name": "model-cache", "mountPath": weight_cache.mount_path})
        volumes.append(
            {"name": "model-cache", "hostPath": {"path": weight_cache.host_path, "type": "DirectoryOrCreate"}}
        )
    token_env, token_mounts, token_volumes = _token_parts(token)
    env += token_env
    mounts += token_mounts
    volumes += token_volumes
    if log_relay:
        mounts.append(ray_logs_mount())
        volumes.append(ray_logs_volume())
    container = {
        "name": "ray-worker",
        "image": image,
        "env": env,
        "resources": {
            "requests": {"cpu": str(resources.cpu_request), "memory": _gib(resources.memory_request_gib), **devices},
            "limits": {"cpu": str(resources.cpu_limit), "memory": _gib(resources.memory_limit_gib), **devices},
        },
        "securityContext": worker_security_context(privilege),
        "volumeMounts": mounts,
        "lifecycle": {"preStop": PRE_STOP},
    }
    return {
        "metadata": {"labels": dict(labels)},
        "spec": {
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "securityContext": dict(POD_SECURITY),
            "nodeSelector": dict(GPU_LABELS),
            "tolerations": [dict(GPU_TOLERATION)],
            "containers": [container, *([relay_container(image)] if log_relay else [])],  # the Ray container first
            "volumes": volumes,
        },
    }
