"""Rehearse a stage's Kubernetes half on a local control plane: build the tools, synthesize the stage, start
the cluster with the stage's nodes, apply what a deploy applies in its order, check what the real API server
says of it, and tear it down in destroy order.

Each step is a function of its own so the tests in tests/cluster/ can run them one by one against one
cluster; `run` strings them together for `python -m ops rehearse-cluster`."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.schema import StageConfig
from config.topology import VERIFY_GROUP
from ops.report import Report

from . import control_plane, deploy_order, kwok, nodes, tools
from .apply import Applier, strip_status
from .control_plane import ClusterError, LocalCluster

CRDS = Path(__file__).resolve().parent / "crds"
Progress = Callable[[str], None]


def quiet(line: str) -> None:
    """No progress lines."""


# Charts and add-ons a deploy installs that no registry this project reaches serves at the pinned version,
# and what stands in for them here. Keyed by chart or add-on name; anything not listed is an error (a new
# chart must say how it is rehearsed).
STAND_INS = {
    "nvidia-device-plugin": "the chart's module (github.com/NVIDIA/k8s-device-plugin) is refused by the Go module "
    "proxy at this version; the fake GPU nodes report nvidia.com/gpu as the plugin would",
    "aws-efa-k8s-device-plugin": "an eks-charts chart: no registry route (not a Go module, not on PyPI or npm); the "
    "fake GPU nodes report vpc.amazonaws.com/efa as the plugin would",
    "kuberay-operator": "the chart's module (github.com/ray-project/kuberay) is refused by the Go module proxy at "
    "this version; its CRDs are applied from the committed copy (localcluster/crds/, the "
    "chart's crds/ byte for byte), its Deployment and RBAC are not",
    "vpc-cni": "an EKS managed add-on: no container runs here, so no CNI (NetworkPolicies are admitted, not enforced)",
    "eks-pod-identity-agent": "an EKS managed add-on: no IAM here",
    "amazon-cloudwatch-observability": "an EKS managed add-on (CloudWatch agent, Fluent Bit): no registry route",
    "aws-secrets-store-csi-driver-provider": "an EKS managed add-on: no registry route",
}


class RehearsalError(Exception):
    """One line (and log lines after it): a step that could not run."""


@dataclass
class Applied:
    """What installing the stage did: the objects admitted, and one line per step that was stood in."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)


def versions_match(cfg: StageConfig, modules: Path = tools.MODULES) -> str | None:
    """Why the pinned tools do not fit the stage, or None: the API server's minor must be the stage's
    `cluster.kubernetes_version`, the operator's version exactly `addons.kuberay_operator`."""
    kubernetes = tools.KUBERNETES.version(modules)
    if ".".join(kubernetes.lstrip("v").split(".")[:2]) != cfg.cluster.kubernetes_version:
        return (
            f"the rehearsal builds Kubernetes {kubernetes} (tools/go/kubernetes/go.mod) and the stage runs "
            f"{cfg.cluster.kubernetes_version} (cluster.kubernetes_version)"
        )
    operator = tools.KUBERAY_OPERATOR.version(modules)
    if operator.lstrip("v") != cfg.addons.kuberay_operator.lstrip("v"):
        return (
            f"the rehearsal builds the KubeRay operator {operator} (tools/go/kuberay-operator/go.mod) and the "
            f"stage installs {cfg.addons.kuberay_operator} (addons.kuberay_operator)"
        )
    return None


def build_tools(progress: Progress = quiet) -> dict[str, Path]:
    """Every control-plane binary by name (built once, then cached)."""
    binaries: dict[str, Path] = {}
    for tool in tools.CONTROL_PLANE_TOOLS:
        binaries.update(tools.ensure(tool, progress=progress).binaries)
    return binaries


def synthesize(cfg: StageConfig, outdir: Path) -> Path:
    """The stage's cloud assembly, synthesized in this process (no cdk-nag: the rehearsal reads only what
    the deploy applies). Returns the stage's nested assembly folder."""
    from stacks import assembly  # CDK loads only when a rehearsal synthesizes

    app = assembly.new_app(outdir=str(outdir))
    assembly.build(app, [cfg], nag=False)
    app.synth()
    return outdir / f"assembly-{cfg.stage}"


def start(cfg: StageConfig, folder: Path, binaries: dict[str, Path], progress: Progress = quiet) -> LocalCluster:
    """The control plane, kwok and the stage's nodes, Ready. The verify identity holds exactly the verify
    group, as the verify runner's access entry maps it (stacks/verify_runner.py)."""
    cluster = control_plane.start(folder, binaries, groups={"verify": [VERIFY_GROUP]}, progress=progress)
    try:
        config_file = kwok.config(tools.CACHE / "gomod", folder / "kwok.yaml")
        progress("starting kwok and the stage's nodes")
        cluster.start(
            "kwok", kwok.argv(binaries["kwok"], kubeconfig=cluster.kubeconfig("admin"), config_file=config_file)
        )
        version = tools.KUBERNETES.version()
        applier = Applier(cluster.api())
        made = nodes.stage_nodes(cfg, version)
        for node in made:
            applier.create(node)
        wait_for_nodes(cluster, [n["metadata"]["name"] for n in made])
        return cluster
    except BaseException:
        cluster.stop()
        raise


def wait_for_nodes(cluster: LocalCluster, names: list[str], timeout: float = 60.0) -> None:
    api = cluster.api()
    deadline = time.monotonic() + timeout
    pending = list(names)
    while time.monotonic() < deadline:
        cluster.check_alive()
        pending = [name for name in names if not _ready(api.get(f"/api/v1/nodes/{name}"))]
        if not pending:
            return
        time.sleep(0.5)
    kwok_process = cluster.process("kwok")
    raise ClusterError(
        f"nodes not Ready within {timeout:g} s: {', '.join(pending)}"
        + (f"\n{kwok_process.tail()}" if kwok_process else "")
    )


def _ready(node: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


def crd_objects(version: str) -> list[dict[str, Any]]:
    folder = CRDS / f"kuberay-v{version.lstrip('v')}"
    if not folder.is_dir():
        raise RehearsalError(
            f"no committed KubeRay CRDs for {version} (localcluster/crds/): the chart's module is "
            f"refused by the Go module proxy, so they must be committed with their source"
        )
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]


def wait_established(applier: Applier, crds: Iterable[dict[str, Any]], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    for crd in crds:
        path = applier.path(crd)
        while True:
            status = applier.api.get(path).get("status") or {}
            if any(
                c.get("type") == "Established" and c.get("status") == "True" for c in status.get("conditions") or []
            ):
                break
            if time.monotonic() > deadline:
                raise RehearsalError(f"CRD {crd['metadata']['name']} not Established within {timeout:g} s")
            time.sleep(0.2)


def install(cluster: LocalCluster, steps: list[deploy_order.Step], progress: Progress = quiet) -> Applied:
    """Apply every step in deploy order: manifests by server-side apply with strict field validation; a
    Helm release or add-on by what stands in for it (STAND_INS). The first refusal stops with one line."""
    applier = Applier(cluster.api())
    applied = Applied()
    for step in steps:
        if step.objects:
            progress(f"applying {step.label}")
            for obj in step.objects:
                applied.objects.append(applier.apply(strip_status(obj)))
            continue
        name = step.helm["chart"] if step.helm else step.addon
        if name not in STAND_INS:
            raise RehearsalError(
                f"{step.label}: no rehearsal route and no stand-in for it (localcluster/rehearsal.py STAND_INS)"
            )
        applied.stand_ins.append(f"{step.label}: {STAND_INS[name]}")
        if step.helm and step.helm["chart"] == "kuberay-operator":
            progress(f"{step.label}: applying its CRDs (committed copy)")
            crds = crd_objects(step.helm["version"])
            for crd in crds:
                applier.apply(crd)
            wait_established(applier, crds)
    return applied


def teardown(
    cluster: LocalCluster, steps: list[deploy_order.Step], progress: Progress = quiet, timeout: float = 90.0
) -> list[str]:
    """Delete what the deploy applied, in destroy order (the reverse of the deploy's): each manifest's objects
    last to first, every namespace waited for until the namespace controller has emptied and removed it.
    Returns what was deleted, in order."""
    applier = Applier(cluster.api())
    deleted = []
    for step in reversed(steps):
        for obj in reversed(step.objects):
            progress(f"deleting {obj['kind']} {obj['metadata']['name']}")
            applier.delete(obj, wait=timeout)
            deleted.append(f"{obj['kind']}/{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")
    return deleted


def run(cfg: StageConfig, *, keep: Path | None = None, progress: Progress = quiet) -> Report:
    """The whole rehearsal; its report. Raises RehearsalError, ClusterError, ApplyError or ToolError with one
    line when a step cannot run."""
    from . import checks

    report = Report("rehearse-cluster", cfg.stage)
    binaries = build_tools(progress)
    report.extra["versions"] = {tool.name: tool.version() for tool in tools.ALL_TOOLS}
    with tempfile.TemporaryDirectory(prefix=f"rehearse-cluster-{cfg.stage}-") as scratch:
        folder = keep or Path(scratch) / "cluster"
        progress(f"synthesizing {cfg.stage}")
        steps = deploy_order.steps(synthesize(cfg, Path(scratch) / "cdk.out"))
        cluster = start(cfg, folder, binaries, progress)
        try:
            version = cluster.api().get("/version")["gitVersion"]
            report.add(
                "API server", "pass", f"kube-apiserver {version} on {cluster.endpoint} (TLS, RBAC, Pod Security)"
            )
            applied = install(cluster, steps, progress)
            report.add("deploy order", "pass", " -> ".join(step.label.split(":")[0] for step in steps))
            report.add(
                "objects admitted",
                "pass",
                f"{len(applied.objects)} objects by server-side apply with strict field validation",
            )
            for line in applied.stand_ins:
                report.add("stand-in", "skip", line)
            checks.all_checks(cfg, cluster, applied, report, progress)
            if keep is None:
                progress("tearing down in destroy order")
                deleted = teardown(cluster, steps, progress)
                report.add("teardown", "pass", f"{len(deleted)} objects deleted in destroy order, namespaces gone")
            else:
                report.add("teardown", "skip", f"--keep: the cluster runs on in {folder}")
                report.extra["kept"] = {
                    "folder": str(folder),
                    "endpoint": cluster.endpoint,
                    "kubeconfig": str(cluster.kubeconfig("admin")),
                }
        except BaseException:
            cluster.stop()
            raise
        if keep is None:
            cluster.stop()
    return report
