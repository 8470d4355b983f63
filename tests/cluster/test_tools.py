"""The Go programs are built once into Go's own caches, and a cached binary that is not what was built stops
with one line naming the folder to delete, never an exec error."""

from __future__ import annotations

import dataclasses
import fcntl
import shutil
import subprocess
import threading

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


def test_the_cached_folder_changes_with_the_compiler_flags(tmp_path):
    # A build with other flags is another build: it never reuses binaries compiled without them.
    caches = tools.GoCaches.under(tmp_path)
    inlined = dataclasses.replace(tools.KWOK, compiler_flags="all=-dwarf=false")
    assert tools.install_dir(inlined, caches) != tools.install_dir(tools.KWOK, caches)


def test_a_second_ensure_waits_for_the_running_build_then_builds_nothing(monkeypatch, tmp_path):
    # Without go on PATH, an ensure that did not wait would fail at once instead of finding the build.
    monkeypatch.setenv("PATH", str(tmp_path / "no-go"))
    caches = tools.GoCaches.under(tmp_path)
    target = tools.install_dir(tools.ETCD, caches)
    target.parent.mkdir(parents=True)
    heard: list[str] = []
    records: list[tools.BuildRecord] = []
    waiting = threading.Event()
    ensure = threading.Thread(
        target=lambda: records.append(tools.ensure(tools.ETCD, caches=caches, progress=_heard(heard, waiting)))
    )
    with open(f"{target}.lock", "a") as running_build:
        fcntl.flock(running_build, fcntl.LOCK_EX)
        ensure.start()
        assert waiting.wait(timeout=30), "ensure did not wait for the running build"
        _what_a_build_leaves(target)
    ensure.join(timeout=30)
    version = tools.ETCD.version()
    assert heard == [f"waiting for the build of etcd {version} that another process runs"]
    assert [(record.built, record.binaries) for record in records] == [(False, {"etcd": target / "bin" / "etcd"})]


def _heard(lines: list[str], event: threading.Event):
    def progress(line: str) -> None:
        lines.append(line)
        event.set()

    return progress


def _what_a_build_leaves(target):
    (target / "bin").mkdir(parents=True)
    binary = target / "bin" / "etcd"
    binary.write_bytes(b"#!/bin/sh\n")
    binary.chmod(0o755)
    tools._write_digests(target, {"etcd": binary})


def test_the_go_command_collects_garbage_less_often_unless_the_caller_says(monkeypatch, tmp_path):
    caches = tools.GoCaches.under(tmp_path)
    monkeypatch.delenv("GOGC", raising=False)
    assert caches.environment()["GOGC"] == "400"
    monkeypatch.setenv("GOGC", "off")
    assert caches.environment()["GOGC"] == "off"


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
