"""The cluster stack's kubectl handler itself, run for a Helm release on the local cluster as its Lambda runs it.

The handler is aws-cdk-lib's aws-eks-v2 kubectl-handler, copied into the synthesized assembly as the asset of
the cluster template's `ClusterKubectlProviderHandler` function. Its `helm/__init__.py` `helm_handler(event,
context)` runs `aws eks update-kubeconfig --name C --kubeconfig K`, writes the Values to a file and runs
`helm upgrade ...` with what it builds from the event; K and its working folder sit under TEST_OUTDIR (its
`outdir`). Here it runs unchanged in a child Python, with the layer's helm first on PATH and an `aws` stand-in
whose one command copies the local cluster's kubeconfig to K. The event is the release's ResourceProperties
from the template, with two changes only: ClusterName is the stage's name (the template holds a Ref), and the
chart is the local chart folder without Repository (this machine reaches no chart repository)."""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from localcluster import deploy_order

HANDLER_PREFIX = "ClusterKubectlProviderHandler"
# The child: the handler's own module, imported from the asset and called as Lambda calls it (no context).
RUNNER = (
    "import json, logging, sys\n"
    "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "from helm import helm_handler\n"
    "helm_handler(json.loads(sys.argv[2]), None)\n"
)

# `aws eks update-kubeconfig ... --kubeconfig K`: the local cluster's kubeconfig copied to K.
AWS_STAND_IN = '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = --kubeconfig ] && cp KUBECONFIG_FILE "$2"; shift; done\n'


def _template(assembly: Path, stack: str) -> dict[str, Any]:
    paths = dict(deploy_order.stack_order(assembly))
    return json.loads(paths[stack].read_text())


def handler_dir(assembly: Path, stack: str) -> Path:
    """The kubectl handler's asset folder (the assets sit beside the stage's nested assembly)."""
    resources = _template(assembly, stack)["Resources"]
    (code,) = [
        r["Properties"]["Code"]
        for name, r in resources.items()
        if name.startswith(HANDLER_PREFIX) and r["Type"] == "AWS::Lambda::Function"
    ]
    return assembly.parent / f"asset.{code['S3Key'].removesuffix('.zip')}"


def helm_event(assembly: Path, step: deploy_order.Step, cluster_name: str, chart_dir: Path) -> dict[str, Any]:
    """A Create of the release, its properties as the template holds them (but the two changes above)."""
    props = dict(_template(assembly, step.stack)["Resources"][step.logical_id]["Properties"])
    props.pop("ServiceToken")
    props.pop("Repository", None)
    props.update(ClusterName=cluster_name, Chart=str(chart_dir))
    return {"RequestType": "Create", "ResourceProperties": props}


def _aws_stand_in(folder: Path, kubeconfig: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "aws"
    script.write_text(AWS_STAND_IN.replace("KUBECONFIG_FILE", shlex.quote(str(kubeconfig))))
    script.chmod(0o755)
    return bin_dir


def run_helm(
    handler: Path, event: dict[str, Any], helm: Path, kubeconfig: Path, folder: Path
) -> subprocess.CompletedProcess:
    """The handler's Create of the release; its log (the argv it ran: "Running command: [...]") on stderr."""
    outdir = folder / "outdir"
    outdir.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": f"{_aws_stand_in(folder, kubeconfig)}:{helm.parent}:/usr/bin:/bin",
        "TEST_OUTDIR": str(outdir),
        "PYTHONDONTWRITEBYTECODE": "1",  # nothing written into the assembly's asset folder
        "HOME": str(folder),
        "HELM_CONFIG_HOME": str(folder / "config"),
        "HELM_CACHE_HOME": str(folder / "cache"),
        "HELM_DATA_HOME": str(folder / "data"),
    }
    argv = [sys.executable, "-c", RUNNER, str(handler), json.dumps(event)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)


def helm_argv(log: str) -> list[str]:
    """The argv the handler logged before it ran helm."""
    (line,) = [line for line in log.splitlines() if line.startswith("Running command: ")]
    return list(ast.literal_eval(line.removeprefix("Running command: ")))
