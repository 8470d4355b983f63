"""A Helm release of the stage, installed as the cluster stack's kubectl handler installs it.

The handler (aws-cdk-lib custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/helm/__init__.py, `helm()`)
writes the release's Values as JSON to a file and runs `helm upgrade RELEASE CHART --install
[--create-namespace] --repo REPO --values FILE --version V --namespace NS [--wait] [--timeout T]
--kubeconfig K`. It reads SkipCrds, but its `helm_handler` never passes it on, so no deploy runs `--skip-crds`
(tests/cluster/test_operator_bump.py runs the handler itself and holds this argv to it). Here the same command
runs with the layer's own helm (kubectl_layer.py) and the same release, namespace, values, version and flags;
only the chart comes from the module cache (a local chart folder, checked to be that version) instead of
`--repo`, which this machine cannot reach."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import children


class HelmError(Exception):
    """One line: the release that Helm could not install, and Helm's last line."""


@dataclass(frozen=True)
class Release:
    """A Helm release as the template's Custom::AWSCDK-EKS-HelmChart gives it (deploy_order.Step.helm)."""

    release: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]
    wait: bool = False
    create_namespace: bool = False
    timeout: str | None = None

    @classmethod
    def of(cls, helm: dict[str, Any]) -> Release:
        return cls(
            release=helm["release"],
            chart=helm["chart"],
            version=helm["version"],
            namespace=helm["namespace"],
            values=helm["values"],
            wait=helm["wait"],
            create_namespace=helm["create_namespace"],
            timeout=helm.get("timeout"),
        )


def chart_version(chart_dir: Path) -> str:
    return str(yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"])


def upgrade_argv(helm: Path, release: Release, chart_dir: Path, values_file: Path, kubeconfig: Path) -> list[str]:
    """The handler's command line, flag for flag, with a local chart folder in place of name + --repo."""
    argv = [str(helm), "upgrade", release.release, str(chart_dir), "--install"]
    if release.create_namespace:
        argv.append("--create-namespace")
    argv += ["--values", str(values_file), "--version", release.version, "--namespace", release.namespace]
    if release.wait:
        argv.append("--wait")
    if release.timeout is not None:
        argv += ["--timeout", release.timeout]
    return [*argv, "--kubeconfig", str(kubeconfig)]


def environment(folder: Path) -> dict[str, str]:
    """Helm's config, cache and data folders inside `folder` (nothing of the user's Helm set-up is read)."""
    return {
        "HOME": str(folder),
        "HELM_CONFIG_HOME": str(folder / "config"),
        "HELM_CACHE_HOME": str(folder / "cache"),
        "HELM_DATA_HOME": str(folder / "data"),
        "PATH": "/usr/bin:/bin",
    }


def upgrade_install(helm: Path, release: Release, chart_dir: Path, kubeconfig: Path, folder: Path) -> str:
    """Install or upgrade the release; Helm's output. The chart folder must be the release's version."""
    found = chart_version(chart_dir)
    if found.lstrip("v") != release.version.lstrip("v"):
        raise HelmError(f"{release.release}: the chart at {chart_dir} is {found}, the stage installs {release.version}")
    folder.mkdir(parents=True, exist_ok=True)
    values_file = folder / f"{release.release}.values.yaml"
    values_file.write_text(json.dumps(release.values, indent=2))  # as the handler writes it
    argv = upgrade_argv(helm, release, chart_dir, values_file, kubeconfig)
    result = _run(argv, folder)
    if result.returncode != 0:
        raise HelmError(f"helm upgrade --install {release.release}: {_last_error(result)}")
    return result.stdout


def uninstall(helm: Path, release: Release, kubeconfig: Path, folder: Path) -> None:
    """The handler's Delete: `helm uninstall RELEASE --namespace NS [--wait] [--timeout T]`."""
    argv = [str(helm), "uninstall", release.release, "--namespace", release.namespace]
    if release.wait:
        argv.append("--wait")
    if release.timeout is not None:
        argv += ["--timeout", release.timeout]
    argv += ["--kubeconfig", str(kubeconfig)]
    result = _run(argv, folder)
    if result.returncode != 0:
        raise HelmError(f"helm uninstall {release.release}: {_last_error(result)}")


def _run(argv: list[str], folder: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Helm's run, in a process group ended whole if the wait ends early (a signal, the timeout)."""
    try:
        return children.run(argv, timeout=timeout, env=environment(folder))
    except OSError as exc:  # ENOEXEC, EACCES: the layer's cached helm is not a program any more
        raise HelmError(
            f"{argv[0]} cannot be run ({exc.strerror or exc}): delete {Path(argv[0]).parent} and run it again"
        ) from None
    except subprocess.TimeoutExpired:
        raise HelmError(f"helm {argv[1]} {argv[2]}: no answer within {timeout:g} s (Helm was ended)") from None


def _last_error(result: subprocess.CompletedProcess) -> str:
    """Helm's error (its last line on stderr; stdout only tells what it was doing)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()] or [
        line for line in result.stdout.splitlines() if line.strip()
    ]
    return lines[-1].strip() if lines else f"exit {result.returncode}"
