"""Lambda handler of Custom::KubeRayCrds: the KubeRay chart's CRDs, applied server-side before the chart.

Helm installs a chart's crds/ only when they are absent and never upgrades them (helm.sh/helm/v4
pkg/cmd/upgrade.go, --skip-crds: "CRDs are installed if not already present"), so an operator bump would run
the new operator on the old CRDs. On Create and Update this pulls the chart at the release's version from the
release's repository with the layer's helm, and applies its crds/ with `kubectl apply --server-side
--force-conflicts` (a client-side apply cannot: the CRDs exceed the 256 KiB last-applied annotation). On
Delete it leaves the CRDs: deleting one deletes every object of its kind, RayServices included.

Runs with the kubectl provider's role, layers and network placement (stacks/kuberay_crds.py); stdlib only."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.request

FIELD_MANAGER = "pd-inference-kuberay-crds"
PATH = "/opt/helm:/opt/kubectl:/opt/awscli:" + os.environ.get("PATH", "")


def pull_argv(chart: str, repository: str, version: str, into: str) -> list[str]:
    return ["helm", "pull", chart, "--repo", repository, "--version", version, "--untar", "--untardir", into]


def apply_argv(kubectl: str, crds_dir: str, kubeconfig: str) -> list[str]:
    return [
        kubectl,
        "apply",
        "--server-side",
        "--force-conflicts",
        f"--field-manager={FIELD_MANAGER}",
        "--kubeconfig",
        kubeconfig,
        "-f",
        crds_dir,
    ]


def run(argv: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])}: {(result.stderr or result.stdout).strip()[-800:]}")
    return result.stdout


def apply_crds(props: dict[str, str]) -> str:
    env = {**os.environ, "PATH": PATH, "HOME": "/tmp", "HELM_CACHE_HOME": "/tmp/helm", "HELM_CONFIG_HOME": "/tmp/helm"}
    workdir = tempfile.mkdtemp(dir="/tmp")
    kubeconfig = os.path.join(workdir, "kubeconfig")
    run(["aws", "eks", "update-kubeconfig", "--name", props["ClusterName"], "--kubeconfig", kubeconfig], env)
    run(pull_argv(props["Chart"], props["Repository"], props["Version"], workdir), env)
    crds = os.path.join(workdir, props["Chart"], "crds")
    return run(apply_argv("kubectl", crds, kubeconfig), env)


def respond(event: dict, context, status: str, reason: str = "") -> None:
    """CloudFormation's answer to a Lambda-backed custom resource, PUT to its pre-signed URL."""
    body = {
        "Status": status,
        "Reason": reason or f"see {getattr(context, 'log_stream_name', 'the log')}",
        "PhysicalResourceId": event.get("PhysicalResourceId") or f"kuberay-crds-{event['ResourceProperties']['Chart']}",
        "StackId": event["StackId"],
        "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"],
        "Data": {},
    }
    data = json.dumps(body).encode()
    request = urllib.request.Request(event["ResponseURL"], data=data, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=60):
        pass


def handler(event: dict, context) -> None:
    try:
        if event["RequestType"] in ("Create", "Update"):
            print(apply_crds(event["ResourceProperties"]))
        respond(event, context, "SUCCESS")
    except Exception as exc:  # noqa: BLE001 - every failure must reach CloudFormation, or it waits an hour
        print(f"failed: {exc}")
        respond(event, context, "FAILED", str(exc)[-1000:])
