"""`preflight`: read-only AWS checks that catch what fails first deploys, before `cdk deploy`.

Every call is a Describe/Get/List. Each check records pass, fail (blocks the deploy), warn (worth a
look, does not block) or skip (not applicable, or a prerequisite failed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from clients.kube import parse_json
from clients.report import Report
from config.first_start import gpu_root_volume_floor_gib, system_root_volume_floor_gib
from config.instance_types import INSTANCE_TYPES, instance_family
from config.schema import StageConfig
from config.topology import CLOUDWATCH_OBSERVABILITY_ADDON as CLOUDWATCH_ADDON
from config.topology import SECRETS_PROVIDER_ADDON
from config.versions import CLOUDWATCH_OBSERVABILITY_VERSION, DLC_IMAGE_UNPACK_RATIO, DLC_REGISTRIES, DLC_REPOSITORY

from .aws_clients import Clients
from .errors import AWS_ERRORS, LOG_IN, aws_fix, describe, error_code

# The oldest bootstrap stack version the synthesized templates accept (their CheckBootstrapVersion rule).
MIN_BOOTSTRAP_VERSION = 6
BOOTSTRAP_PARAMETER = "/cdk-bootstrap/hnb659fds/version"


@dataclass(frozen=True)
class VcpuQuota:
    name: str
    on_demand: str
    spot: str
    families: tuple[str, ...]


# EC2 vCPU quotas by the instance families they cover (Service Quotas codes).
QUOTAS = [
    VcpuQuota("G and VT instances", "L-DB2E81BA", "L-3819A6DF", ("g", "vt")),
    VcpuQuota("P instances", "L-417A185B", "L-7212CCBC", ("p",)),
    VcpuQuota(
        "Standard (A, C, D, H, I, M, R, T, Z) instances",
        "L-1216C47A",
        "L-34B43A08",
        ("a", "c", "d", "h", "i", "m", "r", "t", "z"),
    ),
]


@dataclass(frozen=True)
class UpdateRule:
    """How EKS updates a managed nodegroup: its UpdateConfig's updateStrategy and maxUnavailable."""

    strategy: str  # "DEFAULT" or "MINIMAL"
    max_unavailable: int | None = None  # None: no UpdateConfig, EKS's default of 1


# Each nodegroup's update config as stacks/nodegroups.py sets it, which preflight cannot import (it needs CDK):
# the GPU nodegroup gets max_unavailable=GPU_MAX_UNAVAILABLE (1) and UpdateConfig.UpdateStrategy =
# GPU_UPDATE_STRATEGY ("MINIMAL"); the system nodegroup gets no UpdateConfig, so EKS's DEFAULT, maxUnavailable 1.
# tests/ops/test_preflight_surge.py parses stacks/nodegroups.py and fails when the two disagree.
UPDATE_SURGE = {"system": UpdateRule("DEFAULT"), "gpu-worker": UpdateRule("MINIMAL", max_unavailable=1)}


def update_surge(rule: UpdateRule, zones: int) -> int:
    """Instances an update may launch above max_size. MINIMAL "terminates the old instances before launching
    the new instances": none. DEFAULT "launches the new instances first": its scale-up phase raises the Auto
    Scaling group's maximum by the larger of twice the AZs of the nodegroup's subnets and maxUnavailable (EKS API
    Reference, NodegroupUpdateConfig; EKS User Guide, managed-node-update-behavior.html)."""
    if rule.strategy == "MINIMAL":
        return 0
    return max(2 * zones, rule.max_unavailable or 1)


def quota_for(instance_type: str) -> VcpuQuota:
    """The vCPU quota covering an instance type, by the letters its family starts with."""
    letters = re.match(r"[a-z]+", instance_family(instance_type))
    prefix = letters.group(0) if letters else ""
    for quota in QUOTAS:
        if prefix in quota.families or prefix[:1] in quota.families and prefix[:1] not in ("v",):
            return quota
    raise KeyError(f"no vCPU quota known for {instance_type}")


@dataclass
class Facts:
    """What the checks learned, for later checks and for --suggest."""

    account: str | None = None
    zone_ids: dict[str, str] = field(default_factory=dict)
    offered_zones: list[str] = field(default_factory=list)


def run(cfg: StageConfig, clients: Clients) -> tuple[Report, Facts]:
    report, facts = Report("preflight", cfg.stage), Facts()
    if not _credentials(cfg, clients, report, facts):
        for name in (
            "availability zones",
            "GPU type in GPU AZ",
            "EFA support",
            "vCPU quotas",
            "Kubernetes version",
            "CDK bootstrap",
            ADDON_CHECK,
            "token secret",
            "image registry",
        ):
            report.add(name, "skip", "needs working credentials")
    else:
        steps: list[Callable[[StageConfig, Clients, Report, Facts], None]] = [
            _zones,
            _gpu_offering,
            _efa,
            _quotas,
            _kubernetes_version,
            _bootstrap,
            addon_configuration_check,
            _secret,
            _registry,
        ]
        for step in steps:
            step(cfg, clients, report, facts)
    _efa_in_the_pod(cfg, report)
    return report, facts


def _efa_in_the_pod(cfg: StageConfig, report: Report) -> None:
    """What no AWS API answers before the nodes run (docs/DECISIONS.md, "What EFA needs in the pod")."""
    if not cfg.gpu_nodegroup.efa:
        return
    user = "; ipc_lock runs the engine as uid 0" if cfg.serving.worker_privilege == "ipc_lock" else ""
    report.add(
        "EFA in the pod",
        "skip",
        "not knowable before the nodes run: whether they reserve 2 MiB huge pages and the image's user; the pod "
        f"sets FI_EFA_USE_HUGE_PAGE=0{user}, so it needs neither; verify's NIXL transport and KV transfer rate "
        "checks are the proof",
    )


def _guard(report: Report, name: str, fix: str = "") -> Callable:
    """Run a check body; an unexpected AWS or network error becomes that check's one-line failure, with
    the fix for its cause (credentials, permission, network), else `fix`."""

    def wrap(body: Callable[[], None]) -> None:
        try:
            body()
        except AWS_ERRORS as exc:
            report.add(name, "fail", describe(exc), aws_fix(exc, fix))

    return wrap


def _credentials(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> bool:
    name = "credentials"
    try:
        found = clients.session.get_credentials()
    except AWS_ERRORS as exc:  # e.g. an SSO session that expired, a credential_process that fails
        report.add(name, "fail", describe(exc), aws_fix(exc, LOG_IN))
        return False
    if found is None:
        report.add(name, "fail", "no AWS credentials found", LOG_IN)
        return False
    try:
        identity = clients("sts").get_caller_identity()
    except AWS_ERRORS as exc:
        report.add(name, "fail", describe(exc), aws_fix(exc, "check that the credentials are valid and not expired"))
        return False
    facts.account = identity["Account"]
    if cfg.account and cfg.account != facts.account:
        report.add(
            name,
            "fail",
            f"credentials are for account {facts.account}, the stage deploys to {cfg.account}",
            f"use credentials for account {cfg.account}",
        )
        return False
    report.add(name, "pass", f"{identity['Arn']} in account {facts.account}")
    return True


def _zones(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "availability zones"

    def body() -> None:
        zones = clients("ec2").describe_availability_zones(
            Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
        )["AvailabilityZones"]
        facts.zone_ids = {z["ZoneName"]: z["ZoneId"] for z in zones if z.get("State") == "available"}
        missing = [z for z in cfg.availability_zones if z not in facts.zone_ids]
        if missing:
            report.add(
                name,
                "fail",
                f"{', '.join(missing)} not available in {cfg.region} (available: {', '.join(sorted(facts.zone_ids))})",
                "list available AZs in availability_zones (preflight --suggest)",
            )
        else:
            shown = ", ".join(f"{z} ({facts.zone_ids[z]})" for z in cfg.availability_zones)
            report.add(name, "pass", f"{cfg.region}: {shown}")

    try:
        body()
    except AWS_ERRORS as exc:
        opt_in = error_code(exc) in ("OptInRequired", "AuthFailure")
        report.add(
            name,
            "fail",
            describe(exc),
            f"enable {cfg.region} for the account (Account settings, AWS Regions), or use another region"
            if opt_in
            else aws_fix(exc),
        )


def _gpu_offering(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "GPU type in GPU AZ"
    gpu_type, zone = cfg.gpu_nodegroup.instance_type, cfg.gpu_availability_zone

    def body() -> None:
        ec2 = clients("ec2")
        flt = [{"Name": "instance-type", "Values": [gpu_type]}]
        by_name = sorted(
            o["Location"]
            for o in ec2.describe_instance_type_offerings(LocationType="availability-zone", Filters=flt)[
                "InstanceTypeOfferings"
            ]
        )
        by_id = {
            o["Location"]
            for o in ec2.describe_instance_type_offerings(LocationType="availability-zone-id", Filters=flt)[
                "InstanceTypeOfferings"
            ]
        }
        facts.offered_zones = by_name
        zone_id = facts.zone_ids.get(zone, "?")
        if zone in by_name and zone_id in by_id:
            report.add(name, "pass", f"{gpu_type} is offered in {zone} ({zone_id})")
        else:
            offered = ", ".join(f"{z} ({facts.zone_ids.get(z, '?')})" for z in by_name) or "no AZ of the region"
            report.add(
                name,
                "fail",
                f"{gpu_type} is not offered in {zone} ({zone_id}); offered in: {offered}",
                "set gpu_availability_zone to an AZ that offers it (preflight --suggest)",
            )

    _guard(report, name)(body)


def _efa(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "EFA support"
    if not cfg.gpu_nodegroup.efa:
        report.add(name, "skip", "EFA is off for this stage")
        return
    gpu_type = cfg.gpu_nodegroup.instance_type
    needed = INSTANCE_TYPES[gpu_type].efa_interfaces

    def body() -> None:
        (info,) = clients("ec2").describe_instance_types(InstanceTypes=[gpu_type])["InstanceTypes"]
        network = info.get("NetworkInfo", {})
        maximum = network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0) if network.get("EfaSupported") else 0
        if maximum >= needed:
            report.add(
                name, "pass", f"{gpu_type} supports {maximum} EFA interface(s); the launch template uses {needed}"
            )
        else:
            report.add(
                name,
                "fail",
                f"{gpu_type} supports {maximum} EFA interface(s), the stage needs {needed}",
                "choose an instance type with enough EFA interfaces, or set gpu_nodegroup.efa: false (if "
                "EC2 is right and config/instance_types.py is not, correct the table)",
            )

    _guard(report, name)(body)


def _used_vcpus(ec2, quota: VcpuQuota, *, spot: bool) -> int:
    used = 0
    paginator = ec2.get_paginator("describe_instances")
    pages = paginator.paginate(Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                is_spot = instance.get("InstanceLifecycle") == "spot"
                if is_spot != spot:
                    continue
                try:
                    if quota_for(instance["InstanceType"]) != quota:
                        continue
                except KeyError:
                    continue
                used += _vcpus(ec2, instance)
    return used


def _vcpus(ec2, instance: dict) -> int:
    """vCPUs of a running instance: its CPU options, else the type's default vCPUs."""
    cpu = instance.get("CpuOptions") or {}
    if cpu.get("CoreCount"):
        return cpu["CoreCount"] * cpu.get("ThreadsPerCore", 1)
    known = INSTANCE_TYPES.get(instance["InstanceType"])
    if known:
        return known.vcpus
    (info,) = ec2.describe_instance_types(InstanceTypes=[instance["InstanceType"]])["InstanceTypes"]
    return info["VCpuInfo"]["DefaultVCpus"]


def vcpu_needs(cfg: StageConfig) -> dict[tuple[str, bool], tuple[int, str]]:
    """By (quota code, spot): the vCPUs the nodegroups may run, each at max_size plus what an update may add
    (UPDATE_SURGE), and how they were counted."""
    needs: dict[tuple[str, bool], int] = {}
    parts: dict[tuple[str, bool], list[str]] = {}
    # (nodegroup, instance type, max_size, spot, AZs of its subnets): the system nodegroup spans the private
    # subnets of every stage AZ, the GPU nodegroup the one of the GPU AZ (stacks/nodegroups.py).
    groups = [
        (
            "system",
            cfg.system_nodegroup.instance_type,
            cfg.system_nodegroup.max_size,
            False,
            len(cfg.availability_zones),
        ),
        (
            "gpu-worker",
            cfg.gpu_nodegroup.instance_type,
            cfg.gpu_nodegroup.sizes[2],
            cfg.gpu_nodegroup.capacity_type == "spot",
            1,
        ),
    ]
    for group, instance_type, count, spot, zones in groups:
        quota = quota_for(instance_type)
        key = (quota.spot if spot else quota.on_demand, spot)
        rule = UPDATE_SURGE[group]
        surge = update_surge(rule, zones)
        vcpus = INSTANCE_TYPES[instance_type].vcpus
        needs[key] = needs.get(key, 0) + (count + surge) * vcpus
        added = f"{surge} a {rule.strategy} update may add" if surge else f"0 (a {rule.strategy} update adds none)"
        parts.setdefault(key, []).append(f"{count} {group} nodes (max) + {added}, x {vcpus} vCPUs")
    return {key: (needed, "; ".join(parts[key])) for key, needed in needs.items()}


def _quotas(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    """Each nodegroup at its maximum size plus what an update may add against the vCPU quota of its family,
    minus current use."""
    for (code, spot), (needed, counted) in vcpu_needs(cfg).items():
        quota = next(q for q in QUOTAS if code in (q.on_demand, q.spot))
        label = f"vCPU quota {code}"
        kind = "Spot" if spot else "On-Demand"

        def body(code=code, spot=spot, needed=needed, quota=quota, label=label, kind=kind, counted=counted) -> None:
            value = clients("service-quotas").get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
            used = _used_vcpus(clients("ec2"), quota, spot=spot)
            free = int(value) - used
            detail = (
                f"{kind} {quota.name}: quota {int(value)}, in use {used}, free {free}, "
                f"this stage needs up to {needed}: {counted}"
            )
            if free >= needed:
                report.add(label, "pass", detail)
            else:
                report.add(
                    label,
                    "fail",
                    detail,
                    f"request an increase of {code} to at least {used + needed} vCPUs "
                    f"(Service Quotas console, EC2) or lower the nodegroups' sizes (gpu_nodegroup.count or "
                    "max_size, system_nodegroup.max_size)",
                )

        _guard(report, label)(body)


def _kubernetes_version(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "Kubernetes version"
    version = cfg.cluster.kubernetes_version

    def body() -> None:
        versions = clients("eks").describe_cluster_versions(clusterVersions=[version])["clusterVersions"]
        found = [v for v in versions if v.get("clusterVersion") == version]
        if found:
            report.add(name, "pass", f"EKS offers {version} in {cfg.region} ({found[0].get('status', 'listed')})")
        else:
            report.add(
                name,
                "fail",
                f"EKS does not offer {version} in {cfg.region}",
                "choose a version EKS offers there (aws eks describe-cluster-versions)",
            )

    _guard(report, name)(body)


def _bootstrap(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "CDK bootstrap"
    env = f"aws://{facts.account}/{cfg.region}"
    fix = f"scripts/cdk bootstrap {env}"
    try:
        value = clients("ssm").get_parameter(Name=BOOTSTRAP_PARAMETER)["Parameter"]["Value"]
    except AWS_ERRORS as exc:
        if error_code(exc) == "ParameterNotFound":
            report.add(name, "fail", f"{env} is not bootstrapped ({BOOTSTRAP_PARAMETER} not found)", fix)
        else:  # a permission or network problem: bootstrapping again would not fix it
            report.add(
                name,
                "fail",
                describe(exc),
                aws_fix(exc, "run preflight again; if it persists, look at the CDKToolkit stack in CloudFormation"),
            )
        return
    version = int(value) if str(value).isdigit() else 0
    if version >= MIN_BOOTSTRAP_VERSION:
        report.add(name, "pass", f"{env} bootstrapped, version {version}")
    else:
        report.add(name, "fail", f"{env} bootstrap version {value} < {MIN_BOOTSTRAP_VERSION}", fix)


ADDON_CHECK = "CloudWatch add-on"


def addon_schema_errors(schema: dict, values: dict) -> list[str]:
    """Where `values` breaks the add-on version's configuration schema (JSON Schema, its own draft)."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in sorted(validator.iter_errors(values), key=str)
    ]


def addon_configuration_check(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    """EKS validates an add-on's configuration values against its version's schema when the add-on is created
    or updated (EKS API Reference, DescribeAddonConfiguration: configurationSchema), so a refused key fails
    AWS::EKS::Addon and CloudFormation rolls the whole cluster stack back. The stage's configuration is checked
    here against the schema EKS gives for the pinned version; the pipeline runs this check alone before any
    stage deploys (`ops addon-check`, stacks/pipeline.py)."""
    if not cfg.observability.enabled:
        report.add(ADDON_CHECK, "skip", "observability is off: the add-on is not installed")
        return

    def body() -> None:
        from stacks.observability import addon_configuration  # the values the template carries (loads CDK)

        answer = clients("eks").describe_addon_configuration(
            addonName=CLOUDWATCH_ADDON, addonVersion=CLOUDWATCH_OBSERVABILITY_VERSION
        )
        schema = _schema(answer.get("configurationSchema") or "{}")
        if schema is None:
            report.add(
                ADDON_CHECK,
                "fail",
                f"EKS answered a configuration schema for {CLOUDWATCH_ADDON} that is no JSON object",
                "run preflight again; if it persists, check the add-on version in config/versions.py",
            )
            return
        values = addon_configuration(cfg.cluster_name, cfg.serving.namespace, cfg.region)
        errors = addon_schema_errors(schema, values)
        if errors:
            report.add(
                ADDON_CHECK,
                "fail",
                f"{CLOUDWATCH_ADDON} {CLOUDWATCH_OBSERVABILITY_VERSION} refuses the configuration: {errors[0]}"
                + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                "a deploy would fail the add-on and roll back the cluster stack: fix stacks/observability.py for "
                "this add-on version, or pin the version it was written for (config/versions.py)",
            )
        else:
            report.add(
                ADDON_CHECK, "pass", f"{CLOUDWATCH_ADDON} {CLOUDWATCH_OBSERVABILITY_VERSION} accepts the configuration"
            )

    _guard(report, ADDON_CHECK)(body)


def _schema(text: object) -> dict | None:
    """The add-on's JSON schema, or None when EKS's answer is not a JSON object (too deep included)."""
    try:
        schema = parse_json(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return schema if isinstance(schema, dict) else None


def _secret(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "token secret"
    secret = cfg.serving.hf_token_secret
    if not secret:
        report.add(name, "skip", "no hf_token_secret configured (the model is ungated)")
        return
    try:
        found = clients("secretsmanager").describe_secret(SecretId=secret)
    except AWS_ERRORS as exc:
        if error_code(exc) == "ResourceNotFoundException":
            report.add(
                name,
                "fail",
                f"secret {secret!r} does not exist in {cfg.region}",
                f"create it: aws secretsmanager create-secret --name {secret} --secret-string file://token",
            )
        else:
            report.add(
                name, "fail", describe(exc), aws_fix(exc, "let the deploying role call secretsmanager:DescribeSecret")
            )
        return
    report.add(name, "pass", f"{found['ARN']} exists")

    def addon() -> None:
        offered = clients("eks").describe_addon_versions(
            addonName=SECRETS_PROVIDER_ADDON, kubernetesVersion=cfg.cluster.kubernetes_version
        )["addons"]
        if offered:
            report.add(
                "secrets provider add-on",
                "pass",
                f"{SECRETS_PROVIDER_ADDON} is offered for {cfg.cluster.kubernetes_version}",
            )
        else:
            report.add(
                "secrets provider add-on",
                "fail",
                f"{SECRETS_PROVIDER_ADDON} is not offered for {cfg.cluster.kubernetes_version} in {cfg.region}",
                "deploy without hf_token_secret, or in a region that offers the add-on",
            )

    _guard(report, "secrets provider add-on")(addon)


def _registry(cfg: StageConfig, clients: Clients, report: Report, facts: Facts) -> None:
    name = "image registry"
    image = cfg.image
    registry, _, rest = image.partition("/")
    repository, _, tag = rest.partition(":")
    account = DLC_REGISTRIES.get(cfg.region, "")
    if not account or not registry.startswith(f"{account}.dkr.ecr.") or repository != DLC_REPOSITORY:
        report.add(name, "skip", f"{image} is not the DLC image; its registry is not checked")
        return
    try:
        answer = clients("ecr").describe_images(
            registryId=account, repositoryName=repository, imageIds=[{"imageTag": tag}]
        )
    except AWS_ERRORS as exc:
        code = error_code(exc)
        if code in ("AccessDeniedException", "AccessDenied"):
            report.add(
                name,
                "warn",
                f"cannot look into {registry} ({code}); the nodes pull with their own role",
                "nothing to do unless pods later fail with ImagePullBackOff",
            )
        elif code in ("RepositoryNotFoundException", "ImageNotFoundException"):
            report.add(
                name, "fail", f"{image}: {code}", "use a region where the DLC image is published, or set serving.image"
            )
        else:
            report.add(name, "fail", describe(exc), aws_fix(exc))
        return
    report.add(name, "pass", f"{image} is published in {cfg.region}")
    size = (answer.get("imageDetails") or [{}])[0].get("imageSizeInBytes")
    if isinstance(size, int) and size > 0:
        _root_volumes(cfg, report, size / 2**30)


def _root_volumes(cfg: StageConfig, report: Report, compressed_gib: float) -> None:
    """The stage's root volumes against the floors of config/first_start.py, with ECR's size of the image."""
    floors = {
        "system_nodegroup": (cfg.system_nodegroup.root_volume_gib, system_root_volume_floor_gib(compressed_gib)),
        "gpu_nodegroup": (cfg.gpu_nodegroup.root_volume_gib, gpu_root_volume_floor_gib(cfg, compressed_gib)),
    }
    short = [f"{group}.root_volume_gib {given} < {floor}" for group, (given, floor) in floors.items() if given < floor]
    detail = (
        f"the image is {compressed_gib:.1f} GiB compressed, ~{compressed_gib * DLC_IMAGE_UNPACK_RATIO:.0f} unpacked"
    )
    if short:
        report.add("root volumes", "fail", f"{detail}: two of it do not fit: {'; '.join(short)}", "raise them")
    else:
        report.add("root volumes", "pass", f"{detail}: two of it fit every node's root volume")


def suggestion(cfg: StageConfig, facts: Facts) -> str | None:
    """A corrected stage snippet (AZs, GPU AZ) when the GPU AZ or a stage AZ is the problem."""
    if not facts.zone_ids:
        return None
    zones = [z for z in cfg.availability_zones if z in facts.zone_ids]
    offered = [z for z in facts.offered_zones if z in facts.zone_ids]
    gpu_zone = cfg.gpu_availability_zone
    if gpu_zone not in offered:
        if not offered:
            return None
        gpu_zone = next((z for z in offered if z in zones), offered[0])
    for zone in sorted(facts.zone_ids):
        if len(zones) >= max(2, len(cfg.availability_zones)):
            break
        if zone not in zones:
            zones.append(zone)
    if gpu_zone not in zones:
        zones = [gpu_zone] + zones[: max(1, len(zones) - 1)]
    zones = sorted(zones)
    if zones == cfg.availability_zones and gpu_zone == cfg.gpu_availability_zone:
        return None
    return yaml.safe_dump(
        {"availability_zones": zones, "gpu_availability_zone": gpu_zone}, default_flow_style=None, sort_keys=False
    )
