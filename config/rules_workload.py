"""Rules about the workload the serving stack runs: who administers the cluster, which namespace and node
folders it takes, which model it loads, and how many GPUs its replicas need. Same form as config/rules.py
(registered in its `check`): each takes (cfg, path), returns on success and raises ConfigError naming the
field on failure. Every rule here is an allowlist: what is not known to be safe and loadable is refused."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from .derived import (
    GIB,
    PARALLEL_FACTORS,
    RUNTIME_RESERVE_GIB,
    Parallelism,
    documentation_ranges,
    is_gated,
    model_memory_floor,
    parallel_setting,
    parallelism,
    worker_resources,
)
from .engine_args import model_key
from .errors import ConfigError, short
from .instance_types import INSTANCE_TYPES
from .schema import StageConfig
from .topology import CLOUDWATCH_NAMESPACE, KUBERAY_NAMESPACE

# --- cluster.admin_principal_arns ------------------------------------------------------------------------
# EKS access entries take IAM roles and users, never an STS session: "You can't use the STS session principal
# type with access entries because this is a temporary principal for each session and not a permanent identity
# that can be assigned permissions" (EKS API reference, CreateAccessEntry, principalArn; the user guide's
# "Create access entries" page: "An access entry includes the ARN of one, and only one, existing IAM
# principal", a role ARN "can include a path"). The stack gives each ARN an access entry
# (stacks/cluster.py grant_access): a session ARN fails the deploy, and one ARN twice is two entries for one
# principal, which EKS refuses ("An IAM principal can't be included in more than one access entry").
IAM_PRINCIPAL = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):(role|user)/[A-Za-z0-9_+=,.@/-]+")
STS_SESSION = re.compile(r"arn:(aws(?:-[a-z]+)*):(?:sts|iam)::([0-9]{12}):(assumed-role|federated-user)/(.+)")


def admin_principals(cfg: StageConfig, path: str) -> None:
    arns = cfg.cluster.admin_principal_arns
    for index, arn in enumerate(arns):
        field = f"cluster.admin_principal_arns[{index}]"
        if IAM_PRINCIPAL.fullmatch(arn):
            if arn.lower() in (other.lower() for other in arns[:index]):
                raise ConfigError(
                    path,
                    field,
                    f"{short(arn, 120)} is listed twice: EKS takes one access entry per "
                    "IAM principal, and IAM names ignore case (allowed: each ARN once)",
                )
            continue
        session = STS_SESSION.fullmatch(arn)
        if session:
            partition, account, kind, rest = session.groups()
            role = f"arn:{partition}:iam::{account}:role/{rest.split('/')[0]}" if kind == "assumed-role" else None
            raise ConfigError(
                path,
                field,
                f"{short(arn, 120)} is an STS session principal ({kind}), which EKS access entries "
                "refuse: a session is temporary, not an identity that can hold an access entry "
                f"(allowed: the role's IAM ARN, arn:{partition}:iam::{account}:role/NAME"
                + (f", here {role} (with the role's path, if it has one)" if role else "")
                + ")",
            )
        raise ConfigError(
            path,
            field,
            f"{short(arn, 120)} is not an IAM role or user ARN, the only principals an "
            "access entry takes (allowed: arn:aws:iam::ACCOUNT:role/NAME, or "
            "arn:aws:iam::ACCOUNT:user/NAME)",
        )


# --- serving.namespace --------------------------------------------------------------------------------------
# The serving stack creates its namespace, puts a default-deny ingress NetworkPolicy on every pod in it and
# deletes it, with everything in it, on `cdk destroy`. So it must never be a namespace that Kubernetes owns or
# that something else this app installs lives in. KUBERNETES_NAMESPACES are Kubernetes' own (and `kube-` is
# its prefix); APP_NAMESPACES are where this app's add-ons run: the Helm releases (stacks/addons.py
# helm_releases: the two device plugins in kube-system, the KubeRay operator in KUBERAY_NAMESPACE), the EKS
# add-ons (VPC CNI, Pod Identity agent, Secrets Store CSI driver and its AWS provider: kube-system) and the
# CloudWatch Observability add-on (CLOUDWATCH_NAMESPACE, stacks/observability.py).
# tests/config/test_workload_rules.py checks every namespace stacks/addons.py and stacks/observability.py use is here.
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


# --- serving.weight_cache -----------------------------------------------------------------------------------
# The weight cache is a hostPath on the GPU node (charts/ray_pods.py worker_pod: type DirectoryOrCreate) that
# a privileged container writes (serving.worker_privilege): any host folder it names is the node's, as root.
# The project keeps the weights in ONE place, a folder of its own on the node's root volume
# (docs/DECISIONS.md, "Weight cache on the node's root volume": /var/lib/model-cache; the instance-store NVMe
# is not set up by this app's nodegroups, so no /mnt or /opt/dlami/nvme folder holds anything of ours).
# So the host path is that folder or a folder below it, nothing else: a denylist of system folders always
# leaks (/var/lib/kubelet's neighbours, /etc/kubernetes, /var/lib/../etc, a new runtime's state).
HOST_ROOT = "/var/lib/model-cache"
# Inside the Ray container the cache is mounted where nothing of the image or the pod lives: the default
# /model-cache, or /models, or a folder below them or below /mnt. That keeps it off the image's system
# folders (/, /etc, /usr, /bin, /lib*, /proc, /sys, /dev, /run, /var/run, /root, /home, /boot, /tmp, ...) and off
# the pod's own mounts (charts/ray_pods.py: /dev/shm, the token's /var/run/secrets/huggingface, the log
# relay's /tmp/ray): tests/config/test_workload_rules.py renders the pod and checks none is under these.
MOUNT_ROOTS = ("/model-cache", "/models")  # the folder itself, or below it
MOUNT_PARENTS = ("/mnt",)  # only below it
# One segment of a path in normal form: letters, digits, '.', '_' and '-', not starting with '.' or '-' (so
# never '.', '..', a hidden name or an option-looking name), at most 64 characters.
SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def _path_problem(value: str) -> str | None:
    """What keeps `value` from being an absolute path in normal form, or None."""
    if not value.startswith("/"):
        return "is not an absolute path"
    segments = value[1:].split("/")
    if "" in segments:
        return "has an empty segment ('//' or a trailing '/')"
    for segment in segments:
        if segment in (".", ".."):
            return f"has a '{segment}' segment"
        if not SEGMENT.fullmatch(segment):
            return (
                f"has the segment {short(segment)}, which is not a plain name (allowed: letters, digits, "
                "'.', '_' and '-', not starting with '.' or '-', at most 64 characters)"
            )
    return None


def _under(value: str, root: str) -> bool:
    return value.startswith(root + "/")


def weight_cache(cfg: StageConfig, path: str) -> None:
    cache = cfg.serving.weight_cache
    form = "allowed: an absolute path of plain names joined by single '/', no '.' or '..' segment, no trailing '/'"
    problem = _path_problem(cache.host_path)
    if problem:
        raise ConfigError(path, "serving.weight_cache.host_path", f"{short(cache.host_path, 80)} {problem} ({form})")
    if cache.host_path != HOST_ROOT and not _under(cache.host_path, HOST_ROOT):
        raise ConfigError(
            path,
            "serving.weight_cache.host_path",
            f"{cache.host_path} is outside the node's weight cache folder: the worker pod writes its "
            "hostPath as root (no runAsNonRoot, privileged by default), so any other folder of the "
            "node (its OS, kubelet or container runtime state) is root on the node (allowed: "
            f"{HOST_ROOT}, or a folder under {HOST_ROOT}/)",
        )
    problem = _path_problem(cache.mount_path)
    if problem:
        refused = ", which Kubernetes refuses in a mount path" if problem == "has a '..' segment" else ""
        raise ConfigError(
            path, "serving.weight_cache.mount_path", f"{short(cache.mount_path, 80)} {problem}{refused} ({form})"
        )
    mount = cache.mount_path
    if not (mount in MOUNT_ROOTS or any(_under(mount, root) for root in MOUNT_ROOTS + MOUNT_PARENTS)):
        raise ConfigError(
            path,
            "serving.weight_cache.mount_path",
            f"{mount} is outside the folders the cache may be mounted at in the Ray container: it "
            "would cover the image's own folders or clash with the pod's mounts (/dev/shm, /tmp/ray, "
            "the token's /var/run/secrets/huggingface) (allowed: "
            f"{', '.join(MOUNT_ROOTS)}, or a folder under "
            f"{', '.join(root + '/' for root in MOUNT_ROOTS + MOUNT_PARENTS)})",
        )


# --- serving.model.source -----------------------------------------------------------------------------------
# What the Ray worker pods can load: a Hugging Face repo id, downloaded into HF_HOME on the weight cache
# (the token, if any, from serving.hf_token_secret). Not a local path (no such folder exists in the pod: only
# the weight cache is mounted, and HF's own layout there is no model folder), not s3:// (no stack grants the
# Ray pods' role any S3 access: stacks/serving.py gives it secretsmanager:GetSecretValue on the token alone),
# and no other URL scheme (the schema's MODEL_SOURCE pattern refuses them).
# A repo id as huggingface_hub's validate_repo_id (utils/_validators.py, 2.4) takes it: `namespace/name`, each
# 1 to 96 of A-Z a-z 0-9 . _ -, starting and ending with a word character, no '--' or '..', not ending in
# '.git'; here also starting with a letter or digit, and the namespace required (a bare name could be a folder).
HF_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?")


def model_source(cfg: StageConfig, path: str) -> None:
    source = cfg.serving.model.source
    field = "serving.model.source"
    allowed = "allowed: a Hugging Face repo id, org/name, e.g. Qwen/Qwen3.5-9B"
    if source.startswith("s3://"):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is an S3 URI, but no stack grants the Ray pods read "
            "access to S3 (their role reads only the Hugging Face token's secret), so "
            f"vLLM could not load it ({allowed})",
        )
    if source.startswith(("/", "./", "../", "~", "file:")):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is a local path: the Ray worker pods have no such "
            "folder (only the weight cache, where the weights download to) "
            f"({allowed})",
        )
    parts = source.split("/")
    if (
        len(parts) != 2
        or not all(HF_PART.fullmatch(part) for part in parts)
        or "--" in source
        or ".." in source
        or source.endswith(".git")
    ):
        raise ConfigError(
            path,
            field,
            f"{short(source, 80)} is not a Hugging Face repo id ({allowed}; each part 1 "
            "to 96 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            "no '--' or '..', not ending in .git)",
        )


# --- serving.hf_token_secret for a gated model ----------------------------------------------------------------
# A gated repository (config/derived.py KNOWN_MODELS, gated_org) answers a download without a token of an account
# that accepted its licence with 401/403: without serving.hf_token_secret the pods start, vLLM fails to fetch the
# config and the RayService never becomes ready. Refused here, before anything is built.
TOKEN_DOC = 'docs/OPERATIONS.md, "Hugging Face token secret"'


def model_access(cfg: StageConfig, path: str) -> None:
    serving = cfg.serving
    if is_gated(serving.model.source) and not serving.hf_token_secret:
        raise ConfigError(
            path,
            "serving.hf_token_secret",
            f"unset, but {serving.model.source} is a gated Hugging Face model: its download is refused without "
            "the token of an account that accepted its licence on the model page (allowed: the name or ARN of the "
            f"Secrets Manager secret that holds such a token, e.g. pd-inference/hf-token; {TOKEN_DOC} creates it)",
        )


# --- serving.model.id against serving.model.source (a warning) ---------------------------------------------------
# The id is the name clients ask for (`"model": ...` of an OpenAI request, /v1/models); the source is what loads.
# "Names another model" precisely: the id, in lower case with every character but a-z and 0-9 removed, is neither
# the source's repository name (its last path component) nor organisation + name, normalised the same way. So
# qwen3.5-9b, Qwen3.5-9B, qwen3_5_9b and qwen-qwen3.5-9b all name Qwen/Qwen3.5-9B; a stale id left from another
# model (qwen3.5-9b over meta-llama/Llama-3.1-8B), or an alias such as `chat`, is warned about: one line on
# stderr, the exit code unchanged (docs/STAGE_FILE.md, serving.model).


def normalised_model_name(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def placeholder_endpoint_cidrs(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when the public endpoint admits a documentation range only an example uses."""
    endpoint = cfg.cluster.endpoint
    found = documentation_ranges(endpoint.public_access_cidrs) if endpoint.public else []
    if not found:
        return None
    return (
        "cluster.endpoint.public_access_cidrs",
        (
            f"{', '.join(found)} is a documentation range (RFC 5737) nobody connects from: put your office, VPN or "
            "CI egress ranges there, or [] for a private-only endpoint"
        ),
    )


def no_admin_principal(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when nobody is given cluster-admin rights (allowed with allow_no_admin_principals)."""
    if cfg.cluster.admin_principal_arns:
        return None
    return (
        "cluster.admin_principal_arns",
        (
            "empty: after the deploy nobody can use kubectl or `ops verify` (only the verify runner): put your admin "
            "IAM role's ARN there (arn:aws:iam::<account>:role/<name>) and delete allow_no_admin_principals"
        ),
    )


def model_id_mismatch(cfg: StageConfig) -> tuple[str, str] | None:
    """(field, problem) when serving.model.id names another model than serving.model.source, else None."""
    model = cfg.serving.model
    org, _, name = model.source.rstrip("/").rpartition("/")
    wanted = normalised_model_name(model.id)
    if wanted in (normalised_model_name(name), normalised_model_name(org + name)):
        return None
    return (
        "serving.model.id",
        (
            f"{short(model.id, 80)} names another model than serving.model.source {short(model.source, 80)} "
            f"(compared in lower case, letters and digits only: {short(wanted, 60)} vs "
            f"{short(normalised_model_name(name), 60)}): clients asking for {short(model.id, 80)} get "
            f"{short(name, 80)} (fix: id: {short(name.lower(), 80)}; keep the id if the alias is on purpose)"
        ),
    )


# --- GPUs per replica ---------------------------------------------------------------------------------------
# config/derived.py PARALLEL_FACTORS: one replica takes TP x PP x PCP x DP GPUs. The TP ranks of an engine
# share one node (one worker pod per GPU node, no NVLink across nodes); its PP stages, PCP ranks and DP ranks
# are units of TP GPUs each, which Ray places on any node with room (Ray Serve LLM's PACK placement).


def _fits(par: Parallelism, node_gpus: int, nodes: int) -> tuple[int, int]:
    """(units of TP GPUs one replica needs, units the cluster holds)."""
    return par.replica_gpus // par.tensor, (node_gpus // par.tensor) * nodes


def _packs(groups: list[tuple[int, int]], node_gpus: int, nodes: int) -> bool:
    """Whether `count` groups of `size` GPUs each, for every (size, count), fit `nodes` nodes of `node_gpus` GPUs
    with each group on one node: the largest groups first, each node filled in turn (first fit decreasing). Exact
    when every size divides the next larger one and the node's GPU count (1, 2, 4, 8: every TP size on every GPU
    node type here); otherwise it may refuse a packing that a cleverer order finds."""
    free = [node_gpus] * nodes
    for size, count in sorted(groups, reverse=True):
        for node, room in enumerate(free):
            if not count:
                break
            placed = min(count, room // size)
            free[node] -= placed * size
            count -= placed
        if count:
            return False
    return True


def _pd_room(replicas: int, per_replica: int) -> str:
    """What fits when PD's replicas do not: PD runs one prefill and one decode replica at the least."""
    if replicas >= 2:
        return f"at most {replicas} replicas in all, or more GPU nodes"
    return f"serving.mode: colocated, one engine for both phases, or GPU nodes for {2 * per_replica} GPUs"


def serving_capacity(cfg: StageConfig, path: str) -> None:
    """Every engine the mode runs (a PD role with its own engine block as it runs) has whole-number parallel sizes,
    its TP GPUs on one node, one replica within the cluster, and all replicas together within its GPUs."""
    serving, spec = cfg.serving, INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type]
    parallel_layout(cfg, path)  # the layout within one engine first: its heads, its DCP
    engine_memory(cfg, path)
    scheduler_limits(cfg, path)
    # The Ray cluster has one worker pod per GPU node at the nodegroup's desired size, and no node
    # autoscaler: Ray Serve autoscaling moves replicas within those GPUs, never beyond them.
    desired = cfg.gpu_nodegroup.count
    cluster = f"the Ray cluster has {desired * spec.gpus} ({desired} x {cfg.gpu_nodegroup.instance_type})"
    layouts: dict[str | None, Parallelism] = {}
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        for name in PARALLEL_FACTORS:
            value = parallel_setting(engine, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                key = name if name in type(engine).model_fields else f"extra_args.{name}"
                raise ConfigError(
                    path, serving.engine_field(role, key), f"{short(value)} (allowed: a whole number, 1 or more)"
                )
        tp = engine.tensor_parallel_size
        if tp > spec.gpus:
            raise ConfigError(
                path,
                serving.engine_field(role, "tensor_parallel_size"),
                f"{tp} GPUs per engine, but a {cfg.gpu_nodegroup.instance_type} has {spec.gpus} "
                f"(allowed: 1 to {spec.gpus})",
            )
        par = parallelism(engine)
        units, room = _fits(par, spec.gpus, desired)
        if units > room:
            # One replica alone is too big: name the parallel size that multiplies it past the cluster.
            name = next(n for n in reversed(PARALLEL_FACTORS[1:]) if parallel_setting(engine, n) != 1)
            raise ConfigError(
                path,
                serving.engine_field(role, f"extra_args.{name}"),
                f"one replica needs {par.replica_gpus} GPUs ({par.describe()}), {cluster} (allowed: smaller "
                "parallel sizes, or more GPU nodes)",
            )
        layouts[role] = par
    if len(set(layouts.values())) == 1:  # one layout for every replica (always so without per-role engine blocks)
        (par,) = set(layouts.values())
        per_replica = par.replica_gpus
        units, room = _fits(par, spec.gpus, desired)
        most = serving.prefill.most + serving.decode.most
        if most * units > room:
            # Name the side that asks for more (prefill on a tie): that is the setting most likely to change.
            side = "serving.decode" if serving.decode.most > serving.prefill.most else "serving.prefill"
            raise ConfigError(
                path,
                side,
                f"prefill + decode need up to {most * per_replica} GPUs ({most} replicas x "
                f"{par.describe()}), {cluster} (allowed: {_pd_room(room // units, per_replica)})",
            )
        return
    # PD roles of different layouts: each replica's units of TP GPUs, packed onto the nodes together. Only PD has
    # two layouts (a colocated stage's one engine, role None, returned above): every role here is named.
    roles = {role: par for role, par in layouts.items() if role is not None}
    most_of = {role: getattr(serving, role).most for role in roles}
    gpus = {role: most_of[role] * par.replica_gpus for role, par in roles.items()}
    groups = [(par.tensor, most_of[role] * par.replica_gpus // par.tensor) for role, par in roles.items()]
    if not _packs(groups, spec.gpus, desired):
        side = "serving.decode" if gpus["decode"] > gpus["prefill"] else "serving.prefill"
        parts = " + ".join(f"{role} {most_of[role]} x {par.describe()}" for role, par in roles.items())
        raise ConfigError(
            path,
            side,
            f"prefill + decode need up to {sum(gpus.values())} GPUs ({parts}, each engine's TP GPUs on one "
            f"node), {cluster} (allowed: fewer replicas, smaller parallel sizes, or more GPU nodes)",
        )


# --- Tuning arguments against the model, the GPUs and the pod (config/rules_safety.py COUNTED_ARGS) -------------
# The attention heads of the models whose config.json is known (keyed like KNOWN_MODELS, by model_key): (query
# heads, KV heads). Qwen3.5-9B: rehearsal/qwen3.5-9b-config.json, text_config num_attention_heads 16 and
# num_key_value_heads 4 (tests/config/test_engine_identity.py reads them there); Llama 3.1: its config.json on the
# Hub, 32 and 8 (8B), 64 and 8 (70B). Every one is dense (no expert layers). A model not here is not checked.
_LLAMA_8B = ("llama-3.1-8b", "llama-3.1-8b-instruct", "meta-llama-3.1-8b", "meta-llama-3.1-8b-instruct")
_LLAMA_70B = ("llama-3.1-70b", "llama-3.1-70b-instruct", "meta-llama-3.1-70b", "meta-llama-3.1-70b-instruct")
MODEL_HEADS: dict[str, tuple[int, int]] = {
    "qwen3.5-9b": (16, 4),
    **dict.fromkeys(_LLAMA_8B, (32, 8)),
    **dict.fromkeys(_LLAMA_70B, (64, 8)),
}


def _number(args: Mapping[str, object], name: str, default: float | None = None) -> float | None:
    """A numeric engine argument: the schema holds each extra_args value to its vLLM type, so a set one is a
    number here; unset, `default`."""
    value = args.get(name, default)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _int(args: Mapping[str, object], name: str, default: int) -> int:
    value = args.get(name, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def parallel_layout(cfg: StageConfig, path: str) -> None:
    """Every engine's decode context parallel size within its TP ranks, and its TP (and DCP) within the model's
    heads, as vLLM checks them when the engine starts (on the GPU node, after the deploy)."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        tp, dcp = engine.tensor_parallel_size, _int(engine.extra_args, "decode_context_parallel_size", 1)
        dcp_field = serving.engine_field(role, "extra_args.decode_context_parallel_size")
        # vllm/config/parallel.py: "DCP reuses the TP ranks when PCP is disabled" (PCP is reserved here).
        if dcp < 1 or tp % dcp:
            raise ConfigError(
                path,
                dcp_field,
                f"{dcp} with tensor_parallel_size {tp}: the decode context parallel ranks are the engine's TP ranks, "
                f"so vLLM refuses a size that does not divide TP (allowed: "
                f"{', '.join(str(n) for n in range(1, tp + 1) if not tp % n)})",
            )
        heads = MODEL_HEADS.get(model_key(serving.model.source))
        if heads is not None:
            _heads_divide(cfg, path, role, tp, dcp, heads)
        _experts(cfg, path, role, dense=heads is not None)


def _experts(cfg: StageConfig, path: str, role: str | None, *, dense: bool) -> None:
    """Expert parallel needs expert layers (vllm/config/model.py, _verify_with_expert_parallelism: "Number of experts
    in the model must be greater than 0"), which no model of MODEL_HEADS has; EPLB needs expert parallel
    (vllm/config/parallel.py: "enable_expert_parallel must be True to use EPLB")."""
    serving = cfg.serving
    args = serving.engine_for(role).extra_args
    expert_parallel = args.get("enable_expert_parallel") is True
    if dense and expert_parallel:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.enable_expert_parallel"),
            f"true, but {short(serving.model.source, 80)} is dense (no expert layers), and vLLM refuses expert "
            "parallel without experts (allowed: false, or leave it out)",
        )
    if args.get("enable_eplb") is True and not expert_parallel:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.enable_eplb"),
            "true without enable_expert_parallel: true: expert load balancing moves experts between expert-parallel "
            "ranks, and vLLM refuses it without them (allowed: false, or with enable_expert_parallel on an MoE model)",
        )


def _heads_divide(cfg: StageConfig, path: str, role: str | None, tp: int, dcp: int, heads: tuple[int, int]) -> None:
    serving, (query, kv) = cfg.serving, heads
    model = short(serving.model.source, 80)
    # vllm/config/model.py verify_with_parallel_config: "Total number of attention heads (...) must be divisible by
    # tensor parallel size"; vllm/model_executor/layers/linear.py QKVParallelLinear: KV heads split over TP, or
    # replicated when TP is the larger (then TP a multiple of them).
    if query % tp or (kv % tp if tp < kv else tp % kv):
        gpus = INSTANCE_TYPES[cfg.gpu_nodegroup.instance_type].gpus
        sizes = [n for n in range(1, gpus + 1) if not query % n and not (kv % n if n < kv else n % kv)]
        raise ConfigError(
            path,
            serving.engine_field(role, "tensor_parallel_size"),
            f"{tp}, but {model} has {query} attention heads and {kv} KV heads, which vLLM splits over the TP ranks "
            f"and refuses to split unevenly (allowed: {', '.join(map(str, sizes))})",
        )
    # vllm/config/model.py verify_with_parallel_config, DCP with GQA: TP above the KV heads, DCP at most TP // KV
    # heads, and the query heads per KV head divisible by DCP.
    if dcp > 1 and (tp <= kv or dcp > tp // kv or (query // kv) % dcp):
        most = [n for n in range(1, tp // kv + 1) if not tp % n and not (query // kv) % n] if tp > kv else [1]
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.decode_context_parallel_size"),
            f"{dcp} with tensor_parallel_size {tp}: {model} has {kv} KV heads, and vLLM's decode context parallel "
            f"needs TP above them, DCP at most TP // {kv} and dividing {query // kv} query heads per KV head "
            f"(allowed here: {', '.join(map(str, most))}; a larger DCP needs a larger TP)",
        )


def engine_memory(cfg: StageConfig, path: str) -> None:
    """What the counted memory arguments hold, per engine the mode runs: a fixed KV cache against the GPU, one
    sequence and the GpuMemory alarm; offloaded weights and the multimodal cache against the pod's memory limit."""
    for role in cfg.serving.engine_roles():
        _fixed_kv_cache(cfg, path, role)
        _kv_left(cfg, path, role)
        _pod_memory(cfg, path, role)
        _shm_cache(cfg, path, role)


def _fixed_kv_cache(cfg: StageConfig, path: str, role: str | None) -> None:
    serving = cfg.serving
    engine = serving.engine_for(role)
    fixed = _number(engine.extra_args, "kv_cache_memory_bytes")
    if fixed is None:
        return
    field, kv = serving.engine_field(role, "extra_args.kv_cache_memory_bytes"), fixed / GIB
    floor = model_memory_floor(cfg, engine)
    if fixed < 1:
        raise ConfigError(path, field, f"{short(fixed)} (allowed: a positive number of bytes per GPU)")
    if floor is None or floor.gpu_gib <= 0:
        return  # a model of unknown size: nothing to count it against
    # vllm/config/cache.py: "Size of KV Cache per GPU in bytes ... (when not-None) ignores gpu_memory_utilization".
    weights, sequence, room = floor.weights_gib / floor.gpus, floor.kv_gib / floor.gpus, floor.gpu_gib
    if kv < sequence:  # vllm/v1/core/kv_cache_utils.py: "To serve at least one request with the model's max seq len"
        raise ConfigError(
            path,
            field,
            f"{fixed} bytes ({kv:.2f} GiB) per GPU hold less than one {engine.max_model_len}-token sequence "
            f"({sequence:.2f} GiB per GPU), and vLLM refuses to start (allowed: at least "
            f"{math.ceil(sequence * GIB)}, or a smaller max_model_len)",
        )
    held = weights + kv + RUNTIME_RESERVE_GIB
    if held > room:
        most = int((room - weights - RUNTIME_RESERVE_GIB) * GIB)
        raise ConfigError(
            path,
            field,
            f"{kv:.2f} GiB of KV cache + {weights:.1f} GiB of weights + {RUNTIME_RESERVE_GIB:g} GiB reserve = "
            f"{held:.1f} GiB per GPU, more than a GPU's {room:g} GiB: a fixed KV cache ignores "
            f"gpu_memory_utilization, so nothing else keeps it within the GPU (allowed: at most {max(most, 0)})",
        )
    _alarm_room(cfg, path, field, weights, kv, room)


def _alarm_room(cfg: StageConfig, path: str, field: str, weights: float, kv: float, room: float) -> None:
    """stacks/alarms.py GpuMemory fires above observability.gpu_memory_percent: memory held from the start makes it
    fire always (config/rules_safety.py alarm_thresholds judges gpu_memory_utilization the same way)."""
    threshold, percent = cfg.observability.gpu_memory_percent, (weights + kv) / room * 100
    if cfg.observability.enabled and percent >= threshold:
        most = int((room * threshold / 100 - weights) * GIB) - 1
        raise ConfigError(
            path,
            field,
            f"the weights and this fixed KV cache hold {percent:.0f}% of each GPU's memory from the start, at or "
            f"above observability.gpu_memory_percent {threshold:g}, so the GpuMemory alarm would always fire "
            f"(allowed: at most {max(most, 0)} bytes, or a higher gpu_memory_percent)",
        )


def _pod_memory(cfg: StageConfig, path: str, role: str | None) -> None:
    """One engine's pinned CPU memory within the Ray worker's limit: cpu_offload_gb per GPU (vllm/config/offload.py,
    "The space in GiB to offload to CPU, per GPU") and mm_processor_cache_gb per process, an API process and an
    engine core (vllm/config/multimodal.py: "duplicated for each API process and engine core process")."""
    serving = cfg.serving
    engine = serving.engine_for(role)
    offload, cache = (_number(engine.extra_args, name) for name in ("cpu_offload_gb", "mm_processor_cache_gb"))
    if offload is None and cache is None:
        return
    name = "cpu_offload_gb" if offload is not None else "mm_processor_cache_gb"
    offload, cache = offload or 0, 4 if cache is None else cache  # 4 GiB: vLLM's default cache
    need, limit = offload * engine.tensor_parallel_size + cache * 2, worker_resources(cfg).memory_limit_gib
    if offload < 0 or cache < 0 or need > limit:
        raise ConfigError(
            path,
            serving.engine_field(role, f"extra_args.{name}"),
            f"cpu_offload_gb {offload:g} x {engine.tensor_parallel_size} GPUs + mm_processor_cache_gb {cache:g} x 2 "
            f"processes = {need:g} GiB of the Ray worker's memory for one engine, but its limit is {limit} GiB "
            "(serving.worker_resources.memory_limit_gib) (allowed: 0 or more, together within the limit)",
        )


def scheduler_limits(cfg: StageConfig, path: str) -> None:
    """The batch limits of every engine against each other, as vLLM checks them at start (vllm/config/scheduler.py,
    verify_max_model_len): a step takes at least max_num_seqs tokens, and without chunked prefill a whole prompt."""
    serving = cfg.serving
    for role in serving.engine_roles():
        engine = serving.engine_for(role)
        tokens, seqs = engine.max_num_batched_tokens, engine.max_num_seqs
        if tokens is None:
            continue  # vLLM's default fits both
        field = serving.engine_field(role, "max_num_batched_tokens")
        if seqs is not None and tokens < seqs:
            raise ConfigError(
                path,
                field,
                f"{tokens} tokens per step for {seqs} sequences ({serving.engine_field(role, 'max_num_seqs')}): vLLM "
                f"refuses fewer tokens than sequences (allowed: {seqs} or more)",
            )
        if engine.extra_args.get("enable_chunked_prefill") is False and tokens < engine.max_model_len:
            raise ConfigError(
                path,
                field,
                f"{tokens} tokens per step with enable_chunked_prefill: false, below max_model_len "
                f"{engine.max_model_len}: a prompt must fit one step, and vLLM refuses it (allowed: "
                f"{engine.max_model_len} or more, or chunked prefill on)",
            )


def _kv_left(cfg: StageConfig, path: str, role: str | None) -> None:
    """The KV cache left for requests after mm_ipc_gpu_memory_gb (vllm/config/multimodal.py: "carved out of the
    engine's KV-cache memory") and the watermark (vllm/config/scheduler.py: "Fraction of total KV cache blocks to
    keep free") holds one max_model_len sequence, or no request of that length is ever scheduled."""
    serving = cfg.serving
    engine = serving.engine_for(role)
    mark, carved = (_number(engine.extra_args, name) for name in ("watermark", "mm_ipc_gpu_memory_gb"))
    if mark is None and carved is None:
        return
    name = "watermark" if mark is not None else "mm_ipc_gpu_memory_gb"
    field, mark, carved = serving.engine_field(role, f"extra_args.{name}"), mark or 0, carved or 0
    if not 0 <= mark < 1 or carved < 0:
        raise ConfigError(
            path,
            field,
            f"{short(engine.extra_args[name])} (allowed: watermark 0 to below 1, mm_ipc_gpu_memory_gb 0 or more)",
        )
    floor = model_memory_floor(cfg, engine)
    if floor is None or not floor.kv_gib or floor.gpu_gib <= 0:
        return  # the architecture's KV size is unknown
    fixed = _number(engine.extra_args, "kv_cache_memory_bytes")
    room = fixed / GIB * floor.gpus if fixed else floor.available_gib - floor.weights_gib - RUNTIME_RESERVE_GIB
    left = (room - carved) * (1 - mark)
    if left < floor.kv_gib:
        raise ConfigError(
            path,
            field,
            f"({room:.2f} GiB of KV cache - mm_ipc_gpu_memory_gb {carved:g}) x (1 - watermark {mark:g}) = {left:.2f} "
            f"GiB left for requests, less than one {engine.max_model_len}-token sequence ({floor.kv_gib:.2f} GiB), so "
            "no request of that length is ever scheduled (allowed: smaller values, or a smaller max_model_len)",
        )


def _shm_cache(cfg: StageConfig, path: str, role: str | None) -> None:
    """mm_processor_cache_type shm keeps mm_processor_cache_gb (default 4) in /dev/shm (vllm/config/multimodal.py:
    "If `shm`, use shared memory FIFO cache"), a memory-backed emptyDir of serving.worker_resources.shm_gib."""
    serving = cfg.serving
    args = serving.engine_for(role).extra_args
    if args.get("mm_processor_cache_type") != "shm":
        return
    cache, shm = _number(args, "mm_processor_cache_gb", 4) or 0, cfg.serving.worker_resources.shm_gib
    if cache > shm:
        raise ConfigError(
            path,
            serving.engine_field(role, "extra_args.mm_processor_cache_type"),
            f"shm puts mm_processor_cache_gb {cache:g} GiB in /dev/shm, larger than its {shm} GiB "
            "(serving.worker_resources.shm_gib) (allowed: lru, a smaller cache, or a larger shm_gib)",
        )
