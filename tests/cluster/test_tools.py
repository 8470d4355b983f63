"""The Go programs are built once into Go's own caches, and a cached binary that is not what was built stops
with one line naming the folder to delete, never an exec error."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from localcluster import tools
from localcluster.control_plane import ClusterError, LocalCluster


def test_the_caches_are_gos_own_outside_the_clone(box):
    gomodcache, gocache = subprocess.run(
        ["go", "env", "GOMODCACHE", "GOCACHE"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert (str(box.caches.gomodcache), str(box.caches.gocache)) == (gomodcache, gocache)
    assert tools.ROOT not in box.caches.binaries.parents


def test_a_second_ensure_builds_nothing(box):
    record = tools.ensure(tools.ETCD, caches=box.caches)
    assert (record.built, record.binaries["etcd"]) == (False, box.binaries["etcd"])


def test_the_cached_folder_changes_with_the_compiler_flags(monkeypatch, tmp_path):
    # A build with other flags is another build: it never reuses binaries compiled without them.
    caches = tools.GoCaches.under(tmp_path)
    before = tools.install_dir(tools.KWOK, caches)
    monkeypatch.setattr(tools, "COMPILER_FLAGS", "all=-N -l")
    assert tools.install_dir(tools.KWOK, caches) != before


@pytest.fixture
def copied_etcd(box, tmp_path):
    """etcd's cached build, copied into caches of this test's own."""
    caches = tools.GoCaches(box.caches.gomodcache, box.caches.gocache, tmp_path / "bin")
    source = tools.install_dir(tools.ETCD, box.caches)
    target = tools.install_dir(tools.ETCD, caches)
    shutil.copytree(source, target)
    return caches, target


def test_a_truncated_cached_binary_names_the_folder_to_delete(copied_etcd):
    caches, folder = copied_etcd
    (folder / "bin" / "etcd").write_bytes(b"\x7fELF truncated")
    with pytest.raises(tools.ToolError) as refused:
        tools.ensure(tools.ETCD, caches=caches)
    assert str(refused.value) == (
        f"the cached etcd in {folder} is corrupted: delete that folder and run scripts/setup.sh --cluster"
    )


def test_a_binary_that_cannot_be_run_is_one_line_naming_its_folder(tmp_path):
    folder = tmp_path / "etcd-v0-x"
    (folder / "bin").mkdir(parents=True)
    binary = folder / "bin" / "etcd"
    binary.write_bytes(b"not a program")
    binary.chmod(0o755)
    cluster = LocalCluster(folder=tmp_path, pki=None, endpoint="https://127.0.0.1:1", identities={})
    with pytest.raises(ClusterError) as refused:
        cluster.start("etcd", [str(binary)])
    assert str(refused.value) == (
        f"etcd: {binary} cannot be run (Exec format error): delete {folder} and run scripts/setup.sh --cluster"
    )
