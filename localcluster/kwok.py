"""kwok, run out of cluster against the local API server: it keeps the fake nodes Ready (node
initialisation, then heartbeats on a Lease) and moves the pods bound to them to Running with an IP from
the node's pod CIDR, as a kubelet would report it.

kwok's binary runs only the stages it is given (sigs.k8s.io/kwok v0.8.0 pkg/kwok/cmd/root.go: "no stages
found" otherwise; kwokctl passes its defaults). The stages are kwok's own default ones, read from the same
module the binary is built from (kustomize/stage/node/fast, node/heartbeat-with-lease, pod/fast), as
pkg/kwokctl/runtime/cluster.go getDefaultNodeStages/getDefaultPodStages pick them."""

from __future__ import annotations

from pathlib import Path

from .tools import KWOK

STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def config(gomodcache: Path, target: Path) -> Path:
    """kwok's configuration file: its default stages, one YAML document each."""
    source = gomodcache / f"{KWOK.module}@{KWOK.version()}"
    documents = []
    for relative in STAGE_FILES:
        path = source / relative
        if not path.is_file():
            raise FileNotFoundError(f"kwok's stage {relative} is not in the module at {source}")
        documents.append(path.read_text())
    target.write_text("\n---\n".join(documents))
    return target


def argv(binary: Path, *, kubeconfig: Path, config_file: Path) -> list[str]:
    """kwok for the nodes that carry kwok's annotation only (nodes.KWOK_ANNOTATION), with leases, serving
    nothing of its own."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={config_file}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-lease-duration-seconds=40",
        "--cidr=10.244.0.0/16",
        "--node-ip=10.0.0.1",
    ]
