"""Run a stage's Kubernetes half on a local control plane: build the tools, synthesize the stage, start
the cluster with the stage's nodes, apply what a deploy applies in its order, check what the real API server
says of it, and tear it down in destroy order.

Each step is a function of its own so the tests in tests/cluster/ can run them one by one against one
cluster; `run` strings them together for `python -m ops local-cluster`."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.report import Report
from clients.signals import Terminated, deferred
from config.schema import StageConfig
from config.topology import KUBERAY_RELEASE, VERIFY_GROUP
from stacks.kuberay_crds_handler import index as crds_handler  # the deploy's own command lines

from . import control_plane, deploy_order, helm, kubectl_layer, kwok, nodes, operator, tools
from .apply import Applier, strip_status
from .control_plane import ClusterError, LocalCluster
from .ray_head import RayHeadStandIn

Progress = Callable[[str], None]


def quiet(line: str) -> None:
    """No progress lines."""


# Charts and add-ons a deploy installs that no registry this project reaches serves at the pinned version,
# and what stands in for them here. Keyed by chart or add-on name; anything neither installed for real
# (INSTALLED_CHARTS) nor listed is an error (a new chart must say how the local cluster stands it in).
STAND_INS = {
    "nvidia-device-plugin": "the chart's module (github.com/NVIDIA/k8s-device-plugin) is refused by the Go module "
    "proxy at this version; the fake GPU nodes report nvidia.com/gpu as the plugin would",
    "aws-efa-k8s-device-plugin": "an eks-charts chart: no registry route (not a Go module, not on PyPI or npm); the "
    "fake GPU nodes report vpc.amazonaws.com/efa as the plugin would",
    "vpc-cni": "an EKS managed add-on: no container runs here, so no CNI (NetworkPolicies are admitted, not enforced)",
    "eks-pod-identity-agent": "an EKS managed add-on: no IAM here",
    "amazon-cloudwatch-observability": "an EKS managed add-on (CloudWatch agent, Fluent Bit): no registry route",
    "aws-secrets-store-csi-driver-provider": "an EKS managed add-on: no registry route",
}
# Charts installed for real: by the layer's helm, from the module the chart is pinned by (tools/go/).
INSTALLED_CHARTS = {KUBERAY_RELEASE: tools.KUBERAY_CHART}


@dataclass(frozen=True)
class Toolbox:
    """Everything a local-cluster run uses: the Go binaries, the kubectl layer's helm and kubectl, the charts."""

    binaries: dict[str, Path]
    layer: kubectl_layer.LayerTools
    charts: dict[str, Path]  # chart name -> its folder in the module cache
    caches: tools.GoCaches


class LocalClusterError(Exception):
    """One line (and log lines after it): a step that could not run."""


@dataclass
class Applied:
    """What installing the stage did: the objects admitted, and one line per step that was stood in."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)
    releases: list[deploy_order.Step] = field(default_factory=list)  # installed for real


def versions_match(cfg: StageConfig, modules: Path = tools.MODULES) -> str | None:
    """Why the pinned tools do not fit the stage, or None: the API server's minor must be the stage's
    `cluster.kubernetes_version`, the operator's and the chart's version exactly `addons.kuberay_operator`."""
    kubernetes = tools.KUBERNETES.version(modules)
    if ".".join(kubernetes.lstrip("v").split(".")[:2]) != cfg.cluster.kubernetes_version:
        return (
            f"the local cluster builds Kubernetes {kubernetes} (tools/go/kubernetes/go.mod) and the stage runs "
            f"{cfg.cluster.kubernetes_version} (cluster.kubernetes_version)"
        )
    for pinned, folder in ((tools.KUBERAY_OPERATOR, "kuberay-operator"), (tools.KUBERAY_CHART, "kuberay-chart")):
        version = pinned.version(modules)
        if version.lstrip("v") != cfg.addons.kuberay_operator.lstrip("v"):
            return (
                f"the local cluster pins KubeRay {version} (tools/go/{folder}/go.mod) and the stage installs "
                f"{cfg.addons.kuberay_operator} (addons.kuberay_operator)"
            )
    return None


SETUP_COMMAND = "scripts/setup.sh --cluster"


def setup_missing() -> str | None:
    """What of the local cluster's own set-up is missing (without building anything), or None."""
    try:
        import cryptography  # noqa: F401 - localcluster/pki.py's package
    except ModuleNotFoundError:
        return "the Python package cryptography"
    try:
        caches = tools.default_caches()
    except tools.ToolError as exc:
        return str(exc)
    unbuilt = [tool.name for tool in tools.ALL_TOOLS if not tools.built(tool, caches)]
    unbuilt += [source.name for source in tools.MODULE_SOURCES if not tools.downloaded(source, caches)]
    return f"the local cluster's {', '.join(unbuilt)} (not built or downloaded yet)" if unbuilt else None


def toolbox(cfg: StageConfig, progress: Progress = quiet, caches: tools.GoCaches | None = None) -> Toolbox:
    """Every binary and chart the local cluster runs (built or unpacked once, then cached)."""
    caches = caches or tools.default_caches()
    binaries: dict[str, Path] = {}
    for tool in tools.ALL_TOOLS:
        binaries.update(tools.ensure(tool, caches=caches, progress=progress).binaries)
    layer = kubectl_layer.unpack(cfg.cluster.kubernetes_version, caches.binaries)
    charts = {name: tools.module_dir(source, caches) / "helm-chart" / name for name, source in INSTALLED_CHARTS.items()}
    return Toolbox(binaries, layer, charts, caches)


def synthesize(cfg: StageConfig, outdir: Path) -> Path:
    """The stage's cloud assembly, synthesized in this process (no cdk-nag: the local cluster reads only what
    the deploy applies). Returns the stage's nested assembly folder."""
    from stacks import assembly  # CDK loads only when a local-cluster run synthesizes

    app = assembly.new_app(outdir=str(outdir))
    assembly.build(app, [cfg], nag=False)
    app.synth()
    return outdir / f"assembly-{cfg.stage}"


def start(cfg: StageConfig, folder: Path, box: Toolbox, progress: Progress = quiet) -> LocalCluster:
    """The control plane, kwok and the stage's nodes, Ready. The verify identity holds exactly the verify
    group, as the verify runner's access entry maps it (stacks/verify_runner.py)."""
    cluster = control_plane.start(folder, box.binaries, groups={"verify": [VERIFY_GROUP]}, progress=progress)
    try:
        config_file = kwok.config(box.caches.gomodcache, folder / "kwok.yaml")
        progress("starting kwok and the stage's nodes")
        cluster.start(
            "kwok", kwok.argv(box.binaries["kwok"], kubeconfig=cluster.kubeconfig("admin"), config_file=config_file)
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


def install_release(cluster: LocalCluster, box: Toolbox, step: deploy_order.Step, ray_head: RayHeadStandIn) -> str:
    """A chart installed for real with the layer's helm; for the operator's chart, the operator started out of
    cluster with the chart's ServiceAccount. Returns Helm's output."""
    assert step.helm is not None
    release = helm.Release.of(step.helm)
    try:
        output = helm.upgrade_install(
            box.layer.helm, release, box.charts[release.chart], cluster.kubeconfig("admin"), cluster.folder / "helm"
        )
    except helm.HelmError as exc:
        raise LocalClusterError(str(exc)) from None
    if release.chart == KUBERAY_RELEASE:
        operator.start(
            cluster,
            box.binaries["ray-operator"],
            namespace=release.namespace,
            deployment=release.release,
            proxy=ray_head.url,
        )
    return output


def install(
    cluster: LocalCluster,
    steps: list[deploy_order.Step],
    box: Toolbox,
    ray_head: RayHeadStandIn,
    progress: Progress = quiet,
) -> Applied:
    """Apply every step in deploy order: manifests by server-side apply with strict field validation; a Helm
    release for real where its chart is served here (INSTALLED_CHARTS), else by what stands in for it
    (STAND_INS). The first refusal stops with one line."""
    applier = Applier(cluster.api())
    applied = Applied()
    for step in steps:
        if step.objects:
            progress(f"applying {step.label}")
            for obj in step.objects:
                applied.objects.append(applier.apply(strip_status(obj)))
        elif step.crds:
            progress(f"{step.label}: kubectl apply --server-side ({box.layer.kubectl_version}, {box.layer.package})")
            apply_crds(cluster, box, step)
        elif step.helm and step.helm["chart"] in INSTALLED_CHARTS:
            progress(f"{step.label}: helm upgrade --install ({box.layer.helm_version}, {box.layer.package})")
            install_release(cluster, box, step, ray_head)
            applied.releases.append(step)
        else:
            applied.stand_ins.append(f"{step.label}: {_stand_in(step)}")
    return applied


def apply_crds(cluster: LocalCluster, box: Toolbox, step: deploy_order.Step) -> str:
    """The KubeRayCrds step as its handler runs it (stacks/kuberay_crds_handler/index.py), with the layer's
    kubectl, on the chart's crds/ from the module cache (the handler pulls the same chart from its repository)."""
    assert step.crds is not None
    chart = box.charts.get(step.crds["chart"])
    if chart is None or helm.chart_version(chart) != step.crds["version"]:
        raise LocalClusterError(f"{step.label}: no chart {step.crds['chart']} {step.crds['version']} here")
    return apply_crds_from(box.layer.kubectl, chart / "crds", cluster.kubeconfig("admin"))


def apply_crds_from(kubectl: Path, crds_dir: Path, kubeconfig: Path) -> str:
    argv = crds_handler.apply_argv(str(kubectl), str(crds_dir), str(kubeconfig))
    try:
        return crds_handler.run(argv)
    except RuntimeError as exc:
        raise LocalClusterError(f"applying {crds_dir}: {exc}") from None
    except OSError as exc:  # ENOEXEC, EACCES: the layer's cached kubectl is not a program any more
        raise LocalClusterError(
            f"{kubectl} cannot be run ({exc.strerror or exc}): delete {kubectl.parent} and run it again"
        ) from None


def _stand_in(step: deploy_order.Step) -> str:
    name = step.helm["chart"] if step.helm else step.addon
    if name not in STAND_INS:
        raise LocalClusterError(f"{step.label}: no local route and no stand-in for it (localcluster/session.py)")
    return STAND_INS[name]


def teardown(
    cluster: LocalCluster,
    steps: list[deploy_order.Step],
    box: Toolbox,
    progress: Progress = quiet,
    timeout: float = 90.0,
) -> list[str]:
    """Delete what the deploy applied, in destroy order (the reverse of the deploy's): each manifest's objects
    last to first, every namespace waited for until the namespace controller has emptied and removed it, each
    installed release by `helm uninstall` (the handler's Delete), the operator running until its own release
    goes. Returns what was deleted, in order."""
    applier = Applier(cluster.api())
    deleted = []
    for step in reversed(steps):
        if step.helm and step.helm["chart"] in INSTALLED_CHARTS:
            progress(f"helm uninstall {step.helm['release']}")
            _uninstall(cluster, box, helm.Release.of(step.helm))
            deleted.append(f"HelmRelease/{step.helm['namespace']}/{step.helm['release']}")
        for obj in reversed(step.objects):
            progress(f"deleting {obj['kind']} {obj['metadata']['name']}")
            applier.delete(obj, wait=timeout)
            deleted.append(f"{obj['kind']}/{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")
    return deleted


def _uninstall(cluster: LocalCluster, box: Toolbox, release: helm.Release) -> None:
    try:
        helm.uninstall(box.layer.helm, release, cluster.kubeconfig("admin"), cluster.folder / "helm")
    except helm.HelmError as exc:
        raise LocalClusterError(str(exc)) from None
    if release.chart == KUBERAY_RELEASE:
        cluster.stop("kuberay-operator")  # its pod went with the release


def run(cfg: StageConfig, *, keep: Path | None = None, progress: Progress = quiet) -> Report:
    """The whole local-cluster run; its report. Raises LocalClusterError, ClusterError, ApplyError or ToolError with one
    line when a step cannot run. Whatever ends it early (a signal's Terminated included) ends every process it
    started and removes its scratch folder; a signal removes a half-made --keep folder too."""
    report = Report("local-cluster", cfg.stage)
    box = toolbox(cfg, progress)
    report.extra["versions"] = {
        **{tool.name: tool.version() for tool in tools.ALL_TOOLS},
        "helm (kubectl layer)": box.layer.helm_version,
        "kubectl (kubectl layer)": box.layer.kubectl_version,
    }
    try:
        with scratch_folder(f"local-cluster-{cfg.stage}-") as scratch, RayHeadStandIn() as head:
            folder = keep or scratch / "cluster"
            progress(f"synthesizing {cfg.stage}")
            steps = deploy_order.steps(synthesize(cfg, scratch / "cdk.out"))
            cluster = start(cfg, folder, box, progress)
            try:
                _run_steps(cfg, cluster, steps, box, head, report, progress, keep=keep)
            except BaseException:
                cluster.stop()
                raise
            if keep is None:
                cluster.stop()
    except BaseException as exc:
        # Before the scratch folder goes: what no cluster object held yet (a signal between start() and `try`).
        control_plane.stop_everything()
        if keep is not None and isinstance(exc, (Terminated, KeyboardInterrupt)):
            with deferred():
                shutil.rmtree(keep, ignore_errors=True)  # a half-made cluster is not kept
        raise
    return report


@contextmanager
def scratch_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder, removed when the block ends. Made and removed in steps no signal cuts in two
    (tempfile.TemporaryDirectory's removal can be: a SIGTERM in its rmtree would leave half the keys)."""
    made: list[Path] = []
    try:
        with deferred():
            made.append(Path(tempfile.mkdtemp(prefix=prefix)))
        yield made[0]
    finally:
        with deferred():
            for folder in made:
                shutil.rmtree(folder, ignore_errors=True)


def _run_steps(
    cfg: StageConfig,
    cluster: LocalCluster,
    steps: list[deploy_order.Step],
    box: Toolbox,
    head: RayHeadStandIn,
    report: Report,
    progress: Progress,
    *,
    keep: Path | None,
) -> None:
    from . import checks

    version = cluster.api().get("/version")["gitVersion"]
    report.add("API server", "pass", f"kube-apiserver {version} on {cluster.endpoint} (TLS, RBAC, Pod Security)")
    applied = install(cluster, steps, box, head, progress)
    report.add("deploy order", "pass", " -> ".join(step.label.split(":")[0] for step in steps))
    report.add(
        "objects admitted", "pass", f"{len(applied.objects)} objects by server-side apply with strict field validation"
    )
    for line in applied.stand_ins:
        report.add("stand-in", "skip", line)
    checks.all_checks(cfg, cluster, applied, head, report, progress)
    if keep is None:
        progress("tearing down in destroy order")
        deleted = teardown(cluster, steps, box, progress)
        report.add("teardown", "pass", f"{len(deleted)} objects deleted in destroy order, namespaces gone")
    else:
        # The stand-in Ray head ends with this process: the operator would see the head go unhealthy.
        cluster.stop("kuberay-operator")
        report.add("teardown", "skip", f"--keep: the cluster runs on in {keep} (the operator is stopped)")
        report.extra["kept"] = {
            "folder": str(keep),
            "endpoint": cluster.endpoint,
            "kubeconfig": str(cluster.kubeconfig("admin")),
        }
