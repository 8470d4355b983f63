"""ops/diff/synth_cache.py: the sides the base's code synthesizes are kept by commit, stage files, stage and
toolchain, copied on the next diff, and never confused with another input; the tree's own code is never kept."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ops.__main__ import main
from ops.diff import compare, synth, synth_cache
from ops.diff.synth_cache import KEEP, SynthCache

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class Ran(list):
    """The labels of the sides synthesized, in order, and the jsii package folder each was given."""

    packages: dict[str, Path | None]


@pytest.fixture
def synths(monkeypatch):
    """A stand-in synth that records which side ran and writes a one-file assembly."""
    ran = Ran()
    ran.packages = {}

    def fake(tree, out, stage, label, sandbox, packages=None):
        ran.append(label)
        ran.packages[label] = packages
        out.mkdir(parents=True)
        (out / "made-by.txt").write_text(label)

    monkeypatch.setattr(compare, "synth", fake)
    return ran


def _head(repo: Path) -> str:
    """The commit id the base's label names (its first 10 characters)."""
    run = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    return run.stdout[:10]


def _tree(folder: Path, **stage_files: str) -> Path:
    (folder / "config").mkdir(parents=True)
    for name, text in stage_files.items():
        (folder / "config" / f"{name}.yaml").write_text(text)
    return folder


def test_the_key_is_the_same_for_the_same_input_in_another_folder(tmp_path):
    cache = SynthCache(tmp_path / "cache")
    one, two = _tree(tmp_path / "a", dev="x: 1\n"), _tree(tmp_path / "b", dev="x: 1\n")
    assert cache.key(COMMIT, one, "dev") == cache.key(COMMIT, two, "dev")


@pytest.mark.parametrize("what", ["commit", "stage", "stage file bytes", "stage file name", "toolchain"])
def test_the_key_changes_with_each_thing_that_decides_a_synth(what, tmp_path, monkeypatch):
    cache = SynthCache(tmp_path / "cache")
    tree = _tree(tmp_path / "a", dev="x: 1\n")
    before = cache.key(COMMIT, tree, "dev")
    commit, stage = COMMIT, "dev"
    if what == "commit":
        commit = "f" * 40
    elif what == "stage":
        stage = "prod"
    elif what == "stage file bytes":
        (tree / "config" / "dev.yaml").write_text("x: 2\n")
    elif what == "stage file name":
        (tree / "config" / "dev.yaml").rename(tree / "config" / "qa.yaml")
    else:
        monkeypatch.setattr(synth_cache, "toolchain", lambda: "another venv")
    assert cache.key(commit, tree, stage) != before


def test_the_toolchain_names_every_installed_package_and_node():
    toolchain = synth_cache.toolchain()
    assert '"aws-cdk-lib==' in toolchain and '"node": "v' in toolchain


def test_a_second_diff_copies_the_base_sides_and_runs_no_synth(clone, synths, tmp_path, monkeypatch):
    monkeypatch.chdir(clone)
    cache = SynthCache(tmp_path / "cache")
    compare.compute("HEAD", cfn=False, cache=cache)
    # the two sides share a key (an unchanged tree's stage files are the base's): either may be kept before
    # the other's thread looks, so the first diff runs one synth or two
    first = list(synths)
    compare.compute("HEAD", cfn=False, cache=cache)
    assert 1 <= len(first) <= 2 and synths == first  # nothing ran the second time
    assert len(list(cache.folder.iterdir())) == 1  # an unchanged tree's stage files are the base's: one key


def test_an_edited_stage_file_is_synthesized_again_and_the_base_is_copied(clone, synths, tmp_path, monkeypatch):
    monkeypatch.chdir(clone)
    cache = SynthCache(tmp_path / "cache")
    compare.compute("HEAD", cfn=False, cache=cache)
    with (clone / "config" / "dev.yaml").open("a") as handle:
        handle.write("# edited\n")
    synths.clear()
    compare.compute("HEAD", cfn=False, cache=cache)
    assert synths == ["working tree's stage files on the base's code"]


def test_the_trees_own_code_is_synthesized_every_time_and_never_kept(clone, synths, tmp_path, monkeypatch):
    monkeypatch.chdir(clone)
    with (clone / "app.py").open("a") as handle:
        handle.write("# a code change: this checkout's own code synthesizes the tree\n")
    cache = SynthCache(tmp_path / "cache")
    for _ in range(2):
        compare.compute("HEAD", cfn=False, cache=cache)
    base = f"base at HEAD ({_head(clone)})"
    assert sorted(synths) == [base, "working tree", "working tree"]  # the two sides run side by side
    (entry,) = cache.folder.iterdir()
    assert (entry / "made-by.txt").read_text() == base


def test_only_a_synth_of_the_bases_code_shares_jsii_packages_in_the_cache_folder(clone, synths, tmp_path, monkeypatch):
    monkeypatch.chdir(clone)
    with (clone / "app.py").open("a") as handle:
        handle.write("# a code change: the tree's own code must not write what a later synth loads\n")
    cache = SynthCache(tmp_path / "cache")
    compare.compute("HEAD", cfn=False, cache=cache)
    assert synths.packages == {f"base at HEAD ({_head(clone)})": cache.folder / ".jsii-packages", "working tree": None}


def test_jsii_is_told_the_shared_package_folder_only_when_given_one(tmp_path):
    given = synth.env(tmp_path / "out", None, tmp_path / "sandbox", tmp_path / "packages")
    assert given["JSII_RUNTIME_PACKAGE_CACHE_ROOT"] == str(tmp_path / "packages")
    assert "JSII_RUNTIME_PACKAGE_CACHE_ROOT" not in synth.env(tmp_path / "out", None, tmp_path / "sandbox")


def test_no_synth_cache_keeps_nothing(clone, synths, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(clone)
    folder = tmp_path / "cache"
    for _ in range(2):
        assert main(["diff", "--base", "HEAD", "--stage", "dev", "--synth-cache", str(folder), "--no-synth-cache"]) == 0
    assert len(synths) == 4 and not folder.exists()
    capsys.readouterr()


def test_a_copy_that_fails_leaves_no_entry_and_no_partial_folder(tmp_path, monkeypatch):
    cache = SynthCache(tmp_path / "cache")
    out = tmp_path / "base.out"
    out.mkdir()
    (out / "manifest.json").write_text("{}")

    def broken(source, target):
        Path(target).mkdir()
        raise OSError("disk full")

    monkeypatch.setattr(shutil, "copytree", broken)
    cache.store("k", out)
    assert list(cache.folder.iterdir()) == []


def test_the_least_recently_used_beyond_keep_are_removed(tmp_path):
    cache = SynthCache(tmp_path / "cache")
    out = tmp_path / "out"
    out.mkdir()
    for number in range(KEEP + 2):
        cache.store(f"k{number:02d}", out)
    kept = sorted(p.name for p in cache.folder.iterdir())
    assert len(kept) == KEEP and "k00" not in kept and f"k{KEEP + 1:02d}" in kept


def test_a_kept_diff_reports_what_the_synth_did(clone, tmp_path, monkeypatch, capsys):
    """The real synth: the report from kept output is the one the first diff, which synthesized, printed."""
    monkeypatch.chdir(clone)
    with (clone / "config" / "dev.yaml").open("a") as handle:
        handle.write("# a comment: the same templates\n")
    folder = tmp_path / "cache"
    reports = []
    for _ in range(2):
        assert main(["diff", "--base", "HEAD", "--stage", "dev", "--synth-cache", str(folder)]) == 0
        reports.append(capsys.readouterr().out)
    assert reports[0] == reports[1] and "no changes" in reports[0].lower()
    entries = sorted(path.name for path in folder.iterdir())
    assert len(entries) == 3 and entries[0] == ".jsii-packages"  # and two keys: the base, the edited stage files
    assert (folder / ".jsii-packages" / "aws-cdk-lib").is_dir()  # extracted there by the real jsii, not in HOME
