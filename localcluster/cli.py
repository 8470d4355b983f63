"""`local-cluster`: the stage's Kubernetes half on a local, real control plane (localcluster/).

    python -m ops local-cluster --stage NAME [--keep] [--json] [--config-dir DIR]

Starts kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok on loopback with the stage's
nodes, applies what a deploy applies in the deploy's order (the kuberay-operator chart installed by the
kubectl layer's own helm, as the cluster stack's kubectl handler installs it), runs the real KubeRay
operator out of cluster with the chart's ServiceAccount against a stand-in Ray head, prints the operator's
verdict and the other checks, and tears it all down in destroy order. --keep leaves the cluster running
instead (its folder, kubeconfig and how to stop it are printed). No container, no AWS.

Set-up of its own: scripts/setup.sh --cluster (Go 1.26; it builds the Go programs once from the Go module
proxy into Go's own caches, once a machine: docs/LOCAL_CLUSTER.md says how long). Without it: one line naming that command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from clients.signals import EVERY, Terminated, terminating
from config.stage_options import add_stage_options, load_stage

KEEP_DIR = Path(__file__).resolve().parent.parent / ".local-cluster"
HELP = "the stage's Kubernetes objects on a local kube-apiserver (built from source), checked, torn down"


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "local-cluster", help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_stage_options(cmd)
    cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    cmd.add_argument(
        "--keep", action="store_true", help=f"leave the cluster running, without teardown, in {KEEP_DIR.name}/<stage>/"
    )


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def run(args) -> int:
    """Every terminating signal (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) is handled from the first line on, not only
    while the cluster runs: one that arrives before would end the process by its default action (exit -15)."""
    label = f"local-cluster --stage {args.stage}"
    try:
        with terminating(signals=EVERY):
            return _run(args)
    except (Terminated, KeyboardInterrupt) as exc:
        code = exc.exit_code if isinstance(exc, Terminated) else 130
        print(
            f"{label}: stopped by {exc or 'Ctrl-C'}; every process it started is ended, its folder removed",
            file=sys.stderr,
        )
        return code


def _run(args) -> int:
    cfg = load_stage(args)
    if cfg is None:
        return 2
    # As app.py does for `cdk`: jsii's Node end-of-life banner would print into the report (the in-process synth).
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    from . import session
    from .apply import ApplyError
    from .control_plane import ClusterError
    from .deploy_order import AssemblyError
    from .tools import ToolError

    label = f"local-cluster --stage {cfg.stage}"
    refusal = _refusal(cfg, args, session)
    if refusal:
        print(f"{label}: {refusal}", file=sys.stderr)
        return 2
    try:
        report = session.run(cfg, keep=KEEP_DIR / cfg.stage if args.keep else None, progress=_progress)
    except ToolError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    except (ClusterError, ApplyError, AssemblyError, session.LocalClusterError) as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 1
    _print(report, args.json)
    return report.exit_code


def _refusal(cfg, args, session) -> str | None:
    """Why the local cluster cannot start (exit 2): its set-up missing, tools that do not fit, a kept cluster."""
    missing = session.setup_missing()
    if missing:
        return f"its set-up is missing ({missing}): run {session.SETUP_COMMAND}"
    mismatch = session.versions_match(cfg)
    if mismatch:
        return mismatch
    keep = KEEP_DIR / cfg.stage
    if args.keep and keep.exists() and any(keep.iterdir()):
        return f"{keep} holds a kept cluster: stop it first ({stop_command(keep)})"
    return None


def stop_command(folder) -> str:
    """A shell line that ends a kept cluster now: each recorded process leads its own process group
    (localcluster/control_plane.py starts them in new sessions), killed whole (a plain SIGTERM let
    kube-apiserver's graceful shutdown run past 100 s), then the folder with its keys and data removed."""
    return f"for p in $(cat {folder}/pids); do kill -KILL -- -$p; done; rm -rf {folder}"


def _print(report, as_json: bool) -> None:
    if as_json:
        print(report.to_json())
        return
    versions = ", ".join(f"{name} {version}" for name, version in report.extra["versions"].items())
    print(f"ran: {versions}")
    print(report.table())
    print(f"\nthe KubeRay operator's verdict: {_verdict(report)}")
    kept = report.extra.get("kept")
    if kept:
        print(
            f"\nkept running: {kept['endpoint']}; kubectl --kubeconfig {kept['kubeconfig']} ...; "
            f"stop: {stop_command(kept['folder'])}"
        )


def _verdict(report) -> str:
    check = next((c for c in report.checks if c.name == "KubeRay operator"), None)
    return f"{check.status}: {check.detail}" if check else "not reached"
