"""`rehearse-cluster`: the stage's Kubernetes half on a local, real control plane (localcluster/).

    python -m ops rehearse-cluster --stage NAME [--keep] [--json] [--config-dir DIR]

Builds kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and Helm from the Go module proxy
once (cached in .cluster-tools/), starts them on loopback with the stage's nodes, applies what a deploy
applies in the deploy's order, checks it, and tears it down in destroy order. --keep leaves the cluster
running instead (its folder, kubeconfig and how to stop it are printed). Needs Go 1.26 and the Go module
proxy; no container, no AWS.

Exit codes: 0 every check passed; 1 a check failed (the KubeRay operator blocked included) or the cluster did
not start; 2 bad arguments or stage file, the pinned tools do not fit the stage, or Go is missing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config import CONFIG_DIR, ConfigError, load_stages

KEEP_DIR = Path(__file__).resolve().parent.parent / ".rehearse-cluster"
HELP = "the stage's Kubernetes objects on a local kube-apiserver (built from source), checked, torn down"


def add_parser(sub) -> None:
    cmd = sub.add_parser(
        "rehearse-cluster", help=HELP, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    cmd.add_argument("--stage", required=True, help="stage name (config/<stage>.yaml)")
    cmd.add_argument("--config-dir", default=str(CONFIG_DIR), help="folder of stage files")
    cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    cmd.add_argument(
        "--keep", action="store_true", help=f"leave the cluster running, without teardown, in {KEEP_DIR.name}/<stage>/"
    )


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def run(args) -> int:
    try:
        (cfg,) = load_stages(args.config_dir, only=args.stage)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    from localcluster import rehearsal
    from localcluster.apply import ApplyError
    from localcluster.control_plane import ClusterError
    from localcluster.deploy_order import AssemblyError
    from localcluster.tools import ToolError

    label = f"rehearse-cluster --stage {cfg.stage}"
    mismatch = rehearsal.versions_match(cfg)
    if mismatch:
        print(f"{label}: {mismatch}", file=sys.stderr)
        return 2
    keep = KEEP_DIR / cfg.stage if args.keep else None
    if keep is not None and keep.exists() and any(keep.iterdir()):
        print(
            f"{label}: {keep} holds a kept cluster: stop it (kill $(cat {keep}/pids)) and remove the folder first",
            file=sys.stderr,
        )
        return 2
    try:
        report = rehearsal.run(cfg, keep=keep, progress=_progress)
    except ToolError as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 2
    except (ClusterError, ApplyError, AssemblyError, rehearsal.RehearsalError) as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(report.to_json())
    else:
        versions = ", ".join(f"{name} {version}" for name, version in report.extra["versions"].items())
        print(f"ran: {versions}")
        print(report.table())
        kept = report.extra.get("kept")
        if kept:
            print(
                f"\nkept running: {kept['endpoint']}; kubectl --kubeconfig {kept['kubeconfig']} ...; "
                f"stop: kill $(cat {kept['folder']}/pids)"
            )
    return report.exit_code
