"""serving_lab/rehearse/host.py: the host's GPUs from nvidia-smi, its EFA devices from sysfs, its open-file limit."""

from __future__ import annotations

import resource
import subprocess

import pytest

from serving_lab.rehearse import host

H200_LINE = "NVIDIA H200, 143771, 9.0\n"


def _nvidia_smi(stdout: str, returncode: int = 0):
    def run(argv, **_):
        return subprocess.CompletedProcess(argv, returncode, stdout=stdout, stderr="")

    return run


def test_detect_reads_the_gpus_and_the_processes_hard_open_file_limit(tmp_path):
    found = host.detect(run=_nvidia_smi(H200_LINE * 2), sysfs=tmp_path)
    assert found.gpus == (host.Gpu("NVIDIA H200", 143771, "9.0"),) * 2
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert found.open_files == (None if hard == resource.RLIM_INFINITY else hard)


def test_only_devices_bound_to_the_efa_driver_count(tmp_path):
    for name, driver in {"rdmap0s6": "efa", "mlx5_0": "mlx5_core"}.items():
        (tmp_path / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (tmp_path / name / "device").mkdir(parents=True)
        (tmp_path / name / "device" / "driver").symlink_to(tmp_path / "drivers" / driver)
    assert host.efa_devices(tmp_path) == ("rdmap0s6",)


@pytest.mark.parametrize("line", ["NVIDIA H200, 143771", "NVIDIA H200, lots, 9.0"])
def test_an_unexpected_nvidia_smi_line_is_one_line_error(line):
    with pytest.raises(host.HostError, match="nvidia-smi printed an unexpected line"):
        host.parse_gpus(line)


def test_a_failing_nvidia_smi_is_one_line_error_with_its_exit(tmp_path):
    with pytest.raises(host.HostError, match=r"nvidia-smi failed \(exit 9\)"):
        host.detect(run=_nvidia_smi("", returncode=9), sysfs=tmp_path)


def test_an_unlimited_open_file_limit_is_none(monkeypatch):
    monkeypatch.setattr(host.resource, "getrlimit", lambda which: (1024, host.resource.RLIM_INFINITY))
    assert host.open_files_limit() is None


def test_a_finite_hard_limit_is_the_one_that_counts(monkeypatch):
    monkeypatch.setattr(host.resource, "getrlimit", lambda which: (1024, 20_000))
    assert host.open_files_limit() == 20_000
