"""The Ray head and GPU worker pod templates (shared by the chart and the scanners), built from cdk8s-plus-28's
typed core structs (`k8s.PodTemplateSpec`, `k8s.Container`, `k8s.Volume`, `k8s.Quantity`, ...): a misspelt or
mistyped field is a mypy error and a TypeError where it is written, not a field the API server drops. The
RayService is a CRD with a plain-dict spec (charts/inference.py), so each template is serialised by the library
to the plain JSON that spec embeds (`plain_template`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from cdk8s_plus_28 import k8s

from config.derived import PodResources
from config.schema import HeadResources, WeightCache
from config.topology import (
    EFA_RESOURCE,
    GPU_LABELS,
    GPU_RESOURCE,
    GPU_TOLERATION,
    HEAD_PORTS,
    NIXL_METRICS_PORT,
    NIXL_METRICS_PORT_NAME,
    SYSTEM_LABELS,
)

from .log_relay import CONTAINER as RELAY_CONTAINER
from .log_relay import RAY_TMP, RELAY_PROGRAM
from .log_relay import VOLUME as RAY_LOGS_VOLUME
from .ray_tmp import rotation_environment, size_limit_gib
from .worker_env import kernel_cache_environment, worker_environment

TOKEN_DIR = "/var/run/secrets/huggingface"
TOKEN_FILE = "token"
PART_OF = "app.kubernetes.io/part-of"

Struct = TypeVar("Struct")
Fields = ParamSpec("Fields")
_WRITTEN = "_fields_as_written"  # on each struct built by `typed`: its fields, in the order written


def typed(struct: Callable[Fields, Struct], /, *args: Fields.args, **fields: Fields.kwargs) -> Struct:
    """`struct(**fields)`: a misspelt or mistyped field (`securityContex=`) is a mypy error and a TypeError here
    (the fields are the struct constructor's own parameters; each takes keywords only, so `args` is always
    empty). Remembers the order the fields are written in: the rendered YAML lists them so (`plain_template`)."""
    built = struct(*args, **fields)
    setattr(built, _WRITTEN, tuple(name for name, value in fields.items() if value is not None))
    return built


def plain_template(template: k8s.PodTemplateSpec) -> dict[str, Any]:
    """The template as the plain JSON the RayService embeds, serialised by the library: `KubePodTemplate.manifest`
    ("Renders a Kubernetes manifest ... This can be used to inline resource manifests inside other objects (e.g.
    as templates)", cdk8s_plus_28/k8s/__init__.py), which runs the generated `toJson_KubePodTemplateProps`
    (lib/imports/k8s.js in cdk8s_plus_28/_jsii/cdk8s-plus-28@2.5.6.jsii.tgz): Kubernetes' own field names
    (`hostIP`, not `hostIp`), a Quantity or IntOrString as its value, unset fields left out. That lists each
    object's fields alphabetically; `_as_written` puts them back in the order they were written (`typed`)."""
    return _as_written(k8s.KubePodTemplate.manifest(template=template)["template"], template)


def plain_container(container: k8s.Container) -> dict[str, Any]:
    """One container as plain JSON: serialised inside a template (`plain_template`), the one way the library has."""
    template = k8s.PodTemplateSpec(spec=k8s.PodSpec(containers=[container]))
    return plain_template(template)["spec"]["containers"][0]


def _key(name: str) -> str:
    """A field's Python name (`host_ip`, `se_linux_options`) and its Kubernetes name (`hostIP`, `seLinuxOptions`)
    meet here."""
    return name.replace("_", "").lower()


def _as_written(value: Any, struct: Any) -> Any:
    """`value`, the library's JSON for `struct`, with each struct's fields in the order `typed` wrote them (the
    library's order for a struct not built by `typed`); maps (labels, resources) keep their own order."""
    if isinstance(struct, list | tuple):
        return [_as_written(item, member) for item, member in zip(value, struct, strict=True)]
    mapping = getattr(type(struct), "__jsii_name_mapping__", None)
    if mapping is None:  # not a struct: a map, a Quantity, a string, a number
        return value
    fields = {_key(name): name for name in mapping if getattr(struct, name) is not None}
    keys = {_key(key): key for key in value}
    if fields.keys() != keys.keys():  # the library's names meet the struct's one to one, or this is wrong
        raise ValueError(f"{type(struct).__name__}: fields {sorted(fields.values())}, serialised {list(value)}")
    order = [_key(name) for name in getattr(struct, _WRITTEN, ())] or list(keys)
    return {keys[k]: _as_written(value[keys[k]], getattr(struct, fields[k])) for k in order}


@dataclass(frozen=True)
class TokenMount:
    """The Hugging Face token as a file, mounted by the Secrets Store CSI driver (never a k8s Secret)."""

    secret_provider_class: str

    @property
    def path(self) -> str:
        return f"{TOKEN_DIR}/{TOKEN_FILE}"


@functools.cache
def quantity(text: str) -> k8s.Quantity:
    """`k8s.Quantity.from_string`, once per text (each is a call into the library's process; a Quantity is
    immutable, so one serves every field that has its value). From a string, a count stays the string it always
    was (`cpu: '2'`); from_number would render a number."""
    return k8s.Quantity.from_string(text)


def _gib(value: int) -> k8s.Quantity:
    return quantity(f"{value}Gi")


def _count(value: int) -> k8s.Quantity:
    return quantity(str(value))


def _token_parts(token: TokenMount | None) -> tuple[list[k8s.EnvVar], list[k8s.VolumeMount], list[k8s.Volume]]:
    """(env, volumeMounts, volumes) for the token file, empty when no secret is configured."""
    if token is None:
        return [], [], []
    return (
        [typed(k8s.EnvVar, name="HF_TOKEN_PATH", value=token.path)],
        [typed(k8s.VolumeMount, name="hf-token", mount_path=TOKEN_DIR, read_only=True)],
        [
            typed(
                k8s.Volume,
                name="hf-token",
                csi=typed(
                    k8s.CsiVolumeSource,
                    driver="secrets-store.csi.k8s.io",
                    read_only=True,
                    volume_attributes={"secretProviderClass": token.secret_provider_class},
                ),
            )
        ],
    )


def _pre_stop() -> k8s.Lifecycle:
    stop = typed(k8s.ExecAction, command=["/bin/sh", "-c", "ray stop"])
    return typed(k8s.Lifecycle, pre_stop=typed(k8s.LifecycleHandler, exec=stop))


def _pod_security() -> k8s.PodSecurityContext:
    return typed(k8s.PodSecurityContext, seccomp_profile=typed(k8s.SeccompProfile, type="RuntimeDefault"))


def _resources(requests: dict[str, k8s.Quantity], limits: dict[str, k8s.Quantity]) -> k8s.ResourceRequirements:
    for amount in (*requests.values(), *limits.values()):  # the struct's type check does not look inside maps
        if not isinstance(amount, k8s.Quantity):
            raise TypeError(f"a resource amount is a k8s.Quantity, not {amount!r}")
    return typed(k8s.ResourceRequirements, requests=requests, limits=limits)


def ray_pod_labels(service_name: str) -> dict[str, str]:
    """On every Ray pod of the service: what the network policies select."""
    return {PART_OF: service_name}


def head_pod_template(
    *,
    image: str,
    resources: HeadResources,
    service_account: str,
    token: TokenMount | None,
    labels: dict[str, str],
    serve_env: Sequence[dict[str, str]] = (),
) -> k8s.PodTemplateSpec:
    """On the system node: no GPU there, so NVIDIA_VISIBLE_DEVICES=void keeps the NVIDIA runtime out. `serve_env`:
    how requests reach the replicas (charts/serve_ingress.py), on the head and the workers alike."""
    env, mounts, volumes = _token_parts(token)
    container = typed(
        k8s.Container,
        name="ray-head",
        image=image,
        ports=[typed(k8s.ContainerPort, name=name, container_port=port) for name, port in HEAD_PORTS.items()],
        env=[
            typed(k8s.EnvVar, name="NVIDIA_VISIBLE_DEVICES", value="void"),
            *ray_tmp_env(),
            *_plain_env(serve_env),
            *env,
        ],
        resources=_resources(
            {"cpu": _count(resources.cpu_request), "memory": _gib(resources.memory_request_gib), **ray_tmp_request()},
            {"cpu": _count(resources.cpu_limit), "memory": _gib(resources.memory_limit_gib)},
        ),
        lifecycle=_pre_stop(),
        # The head needs no privilege: no escalation, no capabilities (it runs as the image's user).
        security_context=typed(
            k8s.SecurityContext, allow_privilege_escalation=False, capabilities=typed(k8s.Capabilities, drop=["ALL"])
        ),
        volume_mounts=[ray_logs_mount(), *mounts],
    )
    spec = typed(
        k8s.PodSpec,
        service_account_name=service_account,
        automount_service_account_token=False,
        security_context=_pod_security(),
        node_selector=dict(SYSTEM_LABELS),
        containers=[container],
        volumes=[ray_logs_volume(), *volumes],
    )
    return typed(k8s.PodTemplateSpec, metadata=typed(k8s.ObjectMeta, labels=dict(labels)), spec=spec)


def worker_security_context(privilege: str) -> k8s.SecurityContext:
    """NIXL registers memory with the EFA device, which pins it: a privileged container, or `ipc_lock`: only
    CAP_IPC_LOCK, which lifts the memlock limit for that pinning (linux drivers/infiniband/core/umem.c
    ib_umem_get: over RLIMIT_MEMLOCK only with capable(CAP_IPC_LOCK)). The device files /dev/infiniband/* come
    from the vpc.amazonaws.com/efa request (the EFA device plugin's allocation), not from privilege. An added
    capability is effective only for uid 0 (Kubernetes sets no ambient capabilities), so `ipc_lock` runs the
    engine as root whatever the image's USER (docs/DECISIONS.md, "What EFA needs in the pod")."""
    if privilege == "privileged":
        return typed(k8s.SecurityContext, privileged=True)
    capabilities = typed(k8s.Capabilities, drop=["ALL"], add=["IPC_LOCK"])
    return typed(k8s.SecurityContext, allow_privilege_escalation=False, capabilities=capabilities, run_as_user=0)


def worker_env(*, efa: bool, nixl_metrics: bool = False) -> list[k8s.EnvVar]:
    """The engine's environment on a GPU worker (typed), from charts/worker_env.py's plain data."""
    env = []
    for item in worker_environment(efa=efa, nixl_metrics=nixl_metrics):
        if "valueFrom" in item:
            field = item["valueFrom"]["fieldRef"]["fieldPath"]
            source = typed(k8s.EnvVarSource, field_ref=typed(k8s.ObjectFieldSelector, field_path=field))
            env.append(typed(k8s.EnvVar, name=item["name"], value_from=source))
        else:
            env.append(typed(k8s.EnvVar, name=item["name"], value=item["value"]))
    return env


def ray_logs_volume() -> k8s.Volume:
    """Ray's /tmp/ray, bounded (charts/ray_tmp.py) and shared with the log relay (charts/log_relay.py)."""
    return typed(
        k8s.Volume, name=RAY_LOGS_VOLUME, empty_dir=typed(k8s.EmptyDirVolumeSource, size_limit=_gib(size_limit_gib()))
    )


def _plain_env(items: Sequence[dict[str, str]]) -> list[k8s.EnvVar]:
    return [typed(k8s.EnvVar, name=item["name"], value=item["value"]) for item in items]


def ray_tmp_env() -> list[k8s.EnvVar]:
    """Ray's log rotation, set so that /tmp/ray stays under its bound (charts/ray_tmp.py)."""
    return _plain_env(rotation_environment())


def ray_tmp_request() -> dict[str, k8s.Quantity]:
    """The Ray container's ephemeral-storage request: the room /tmp/ray may take, which the scheduler counts."""
    return {"ephemeral-storage": _gib(size_limit_gib())}


def ray_logs_mount(*, read_only: bool = False) -> k8s.VolumeMount:
    return typed(k8s.VolumeMount, name=RAY_LOGS_VOLUME, mount_path=RAY_TMP, read_only=True if read_only else None)


def relay_container(image: str) -> k8s.Container:
    """The log relay (charts/log_relay.py): the Ray image's Python, no privileges, a read-only view of /tmp/ray."""
    return typed(
        k8s.Container,
        name=RELAY_CONTAINER,
        image=image,
        command=["python3", "-B", "-u", "-c", RELAY_PROGRAM],
        resources=_resources(
            {"cpu": quantity("50m"), "memory": quantity("64Mi")},
            {"cpu": quantity("200m"), "memory": quantity("128Mi")},
        ),
        security_context=typed(
            k8s.SecurityContext,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=typed(k8s.Capabilities, drop=["ALL"]),
        ),
        volume_mounts=[ray_logs_mount(read_only=True)],
    )


def _worker_storage(
    resources: PodResources, weight_cache: WeightCache, token: TokenMount | None, *, nixl_metrics: bool
) -> tuple[list[k8s.EnvVar], list[k8s.VolumeMount], list[k8s.Volume]]:
    """(env, volumeMounts, volumes) of the GPU worker: the engine's environment, /dev/shm, the bounded /tmp/ray,
    the weight cache and the token file."""
    env = [*worker_env(efa=bool(resources.efa_interfaces), nixl_metrics=nixl_metrics), *ray_tmp_env()]
    mounts = [typed(k8s.VolumeMount, name="dshm", mount_path="/dev/shm"), ray_logs_mount()]
    shm = typed(k8s.EmptyDirVolumeSource, medium="Memory", size_limit=_gib(resources.shm_gib))
    volumes = [typed(k8s.Volume, name="dshm", empty_dir=shm), ray_logs_volume()]
    if weight_cache.enabled:
        env.append(typed(k8s.EnvVar, name="HF_HOME", value=f"{weight_cache.mount_path}/huggingface"))
        if weight_cache.kernels:
            env += [typed(k8s.EnvVar, **var) for var in kernel_cache_environment(f"{weight_cache.mount_path}/kernels")]
        mounts.append(typed(k8s.VolumeMount, name="model-cache", mount_path=weight_cache.mount_path))
        cache = typed(k8s.HostPathVolumeSource, path=weight_cache.host_path, type="DirectoryOrCreate")
        volumes.append(typed(k8s.Volume, name="model-cache", host_path=cache))
    token_env, token_mounts, token_volumes = _token_parts(token)
    return env + token_env, mounts + token_mounts, volumes + token_volumes


def worker_pod_template(
    *,
    image: str,
    resources: PodResources,
    privilege: str,
    weight_cache: WeightCache,
    service_account: str,
    token: TokenMount | None,
    labels: dict[str, str],
    log_relay: bool = False,
    nixl_metrics: bool = False,
    serve_env: Sequence[dict[str, str]] = (),
) -> k8s.PodTemplateSpec:
    """One per GPU node, holding all its GPUs and EFA interfaces. `log_relay`: a second container prints
    NIXL's transport lines from Ray's log files to the container log (charts/log_relay.py). `nixl_metrics` (PD
    mode): NIXL's Prometheus exporter on the named port NIXL_METRICS_PORT_NAME (charts/worker_env.py)."""
    devices = {GPU_RESOURCE: _count(resources.gpus)}
    if resources.efa_interfaces:
        devices[EFA_RESOURCE] = _count(resources.efa_interfaces)
    env, mounts, volumes = _worker_storage(resources, weight_cache, token, nixl_metrics=nixl_metrics)
    env += _plain_env(serve_env)
    ports = [typed(k8s.ContainerPort, name=NIXL_METRICS_PORT_NAME, container_port=NIXL_METRICS_PORT)]
    container = typed(
        k8s.Container,
        name="ray-worker",
        image=image,
        ports=ports if nixl_metrics else None,
        env=env,
        resources=_resources(
            {
                "cpu": _count(resources.cpu_request),
                "memory": _gib(resources.memory_request_gib),
                **ray_tmp_request(),
                **devices,
            },
            {"cpu": _count(resources.cpu_limit), "memory": _gib(resources.memory_limit_gib), **devices},
        ),
        security_context=worker_security_context(privilege),
        volume_mounts=mounts,
        lifecycle=_pre_stop(),
    )
    spec = typed(
        k8s.PodSpec,
        service_account_name=service_account,
        automount_service_account_token=False,
        security_context=_pod_security(),
        node_selector=dict(GPU_LABELS),
        tolerations=[typed(k8s.Toleration, **GPU_TOLERATION)],
        containers=[container, *([relay_container(image)] if log_relay else [])],  # the Ray container first
        volumes=volumes,
    )
    return typed(k8s.PodTemplateSpec, metadata=typed(k8s.ObjectMeta, labels=dict(labels)), spec=spec)
