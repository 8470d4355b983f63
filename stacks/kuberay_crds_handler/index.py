"""Lambda handler of Custom::KubeRayCrds: the KubeRay chart's CRDs, applied server-side before the chart.

Helm installs a chart's crds/ only when they are absent and never upgrades them (helm.sh/helm/v4
pkg/cmd/upgrade.go, --skip-crds: "CRDs are installed if not already present"), so an operator bump would run
the new operator on the old CRDs. On Create and Update this pulls the chart at the release's version from the
release's repository with the layer's helm, and applies its crds/ with `kubectl apply --server-side
--force-conflicts` (a client-side apply cannot: the CRDs exceed the 256 KiB last-applied annotation). On
Delete it leaves the CRDs: deleting one deletes every object of its kind, RayServices included.

Every step is bounded (STEP_SECONDS), the pull is tried once more after a transient error of the chart
repository, and the worst case (WORST_CASE_SECONDS), answer included, is what stacks/kuberay_crds.py sizes the
Lambda's timeout and the resource's ServiceTimeout from: a hang answers FAILED in minutes, not CloudFormation's
default hour.

Runs with the kubectl provider's role, layers and network placement (stacks/kuberay_crds.py); stdlib only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
import urllib.request

FIELD_MANAGER = "pd-inference-kuberay-crds"
PATH = "/opt/helm:/opt/kubectl:/opt/awscli:" + os.environ.get("PATH", "")
# Each step's bound in seconds: the kubeconfig (one EKS DescribeCluster), the chart's pull (its repository's
# index.yaml and the chart), the server-side apply of the four CRDs; then the PUT of the answer.
STEP_SECONDS = {"kubeconfig": 60, "pull": 90, "apply": 120}
RETRY_PAUSE_SECONDS = 10  # before the one more try of a pull that met a transient error
RESPOND_SECONDS = 30
WORST_CASE_SECONDS = (
    STEP_SECONDS["kubeconfig"]
    + 2 * STEP_SECONDS["pull"]
    + RETRY_PAUSE_SECONDS
    + STEP_SECONDS["apply"]
    + RESPOND_SECONDS
)
# What a second try may not meet: Helm's HTTP getter's "failed to fetch URL : STATUS" (helm.sh/helm/v4 v4.1.4
# pkg/getter/httpgetter.go) with a 5xx or 429 status, Go's network errors, and a pull that outran its bound.
TRANSIENT = re.compile(
    r" : (5[0-9][0-9]|429) |i/o timeout|connection reset|connection refused|TLS handshake timeout|no such host"
    r"|unexpected EOF|Client\.Timeout"
)


class StepError(RuntimeError):
    """A step that failed or outran its bound; `transient` when a second try may succeed."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


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


def run(argv: list[str], env: dict[str, str] | None = None, seconds: int = STEP_SECONDS["apply"]) -> str:
    """The command's stdout; a StepError when it fails or outruns `seconds` (subprocess.run then kills it)."""
    step = " ".join(argv[:3])
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=seconds, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise StepError(f"{step}: no answer within {seconds} s", transient=True) from None
    if result.returncode != 0:
        text = (result.stderr or result.stdout).strip()
        raise StepError(f"{step}: {text[-800:]}", transient=bool(TRANSIENT.search(text)))
    return result.stdout


def pull_once(props: dict[str, str], into: str, env: dict[str, str]) -> str:
    run(pull_argv(props["Chart"], props["Repository"], props["Version"], into), env, STEP_SECONDS["pull"])
    return os.path.join(into, props["Chart"])


def pull(props: dict[str, str], workdir: str, env: dict[str, str]) -> str:
    """The chart's folder; after a transient error, one more try into a fresh folder (`--untar` refuses a
    folder that exists)."""
    try:
        return pull_once(props, os.path.join(workdir, "pull-1"), env)
    except StepError as exc:
        if not exc.transient:
            raise
        print(f"the pull failed, trying once more in {RETRY_PAUSE_SECONDS} s: {exc}")
    time.sleep(RETRY_PAUSE_SECONDS)
    return pull_once(props, os.path.join(workdir, "pull-2"), env)


def apply_crds(props: dict[str, str]) -> str:
    env = {**os.environ, "PATH": PATH, "HOME": "/tmp", "HELM_CACHE_HOME": "/tmp/helm", "HELM_CONFIG_HOME": "/tmp/helm"}
    workdir = tempfile.mkdtemp(dir="/tmp")
    kubeconfig = os.path.join(workdir, "kubeconfig")
    update = ["aws", "eks", "update-kubeconfig", "--name", props["ClusterName"], "--kubeconfig", kubeconfig]
    run(update, env, STEP_SECONDS["kubeconfig"])
    chart = pull(props, workdir, env)
    return run(apply_argv("kubectl", os.path.join(chart, "crds"), kubeconfig), env, STEP_SECONDS["apply"])


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
    with urllib.request.urlopen(request, timeout=RESPOND_SECONDS):
        pass


def handler(event: dict, context) -> None:
    try:
        if event["RequestType"] in ("Create", "Update"):
            print(apply_crds(event["ResourceProperties"]))
        respond(event, context, "SUCCESS")
    except Exception as exc:  # noqa: BLE001 - every failure must reach CloudFormation, or it waits an hour
        print(f"failed: {exc}")
        respond(event, context, "FAILED", str(exc)[-1000:])
