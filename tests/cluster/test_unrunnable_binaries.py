"""Every cached program the local cluster runs that cannot be executed (Exec format error: truncated, another
architecture's; Permission denied: its mode lost) stops with one line naming the file and the fix, never an
internal error: the Go programs (test_tools.py), the kubectl layer's helm and kubectl, and the go command
itself. No cluster and no build needed: each program here is a file that is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster import helm, session, tools

RELEASE = helm.Release("kuberay-operator", "kuberay-operator", "1.7.0", "kuberay-system", {})


def _not_a_program(folder: Path, name: str, mode: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"\x7fELF cut short")
    path.chmod(mode)
    return path


CASES = [(0o755, "Exec format error"), (0o644, "Permission denied")]


@pytest.mark.parametrize("mode, why", CASES)
def test_a_helm_that_cannot_be_run_names_its_folder(tmp_path, mode, why):
    binary = _not_a_program(tmp_path / "kubectl-layer-1.35-abc", "helm", mode)
    with pytest.raises(helm.HelmError) as refused:
        helm.uninstall(binary, RELEASE, tmp_path / "admin.kubeconfig", tmp_path / "helm")
    assert str(refused.value) == f"{binary} cannot be run ({why}): delete {binary.parent} and run it again"


@pytest.mark.parametrize("mode, why", CASES)
def test_a_kubectl_that_cannot_be_run_names_its_folder(tmp_path, mode, why):
    binary = _not_a_program(tmp_path / "kubectl-layer-1.35-abc", "kubectl", mode)
    with pytest.raises(session.LocalClusterError) as refused:
        session.apply_crds_from(binary, tmp_path / "crds", tmp_path / "admin.kubeconfig")
    assert str(refused.value) == f"{binary} cannot be run ({why}): delete {binary.parent} and run it again"


@pytest.mark.parametrize("mode, why", CASES)
def test_a_go_command_that_cannot_be_run_is_one_line(tmp_path, monkeypatch, mode, why):
    go = _not_a_program(tmp_path / "go" / "bin", "go", mode)
    monkeypatch.setenv("PATH", f"{go.parent}:/usr/bin:/bin")
    caches = tools.GoCaches(tmp_path / "mod", tmp_path / "cache", tmp_path / "bin")
    expected = f"the go command ({go}) cannot be run ({why}): reinstall Go 1.26 (README: set-up)"
    with pytest.raises(tools.ToolError) as refused:
        tools.go_command(["version"], folder=tmp_path, caches=caches)
    assert str(refused.value) == expected
    with pytest.raises(tools.ToolError) as refused:
        tools.default_caches()
    assert str(refused.value) == expected
