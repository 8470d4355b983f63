"""serving_lab/scripts/rehearsal_install.sh, run for real on a small pack made the way serving_lab/scripts/rehearsal_pack.sh makes
them (a tree per name, tar + xz, cut into pieces, SHA256SUMS): it checks, unpacks, points the console
scripts at this host's Python, prints only shell lines, is idempotent, and refuses a damaged or missing
piece with one line and exit 1."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Mapping
from pathlib import Path

import pytest

from ...helpers import ROOT

INSTALL = ROOT / "serving_lab" / "scripts" / "rehearsal_install.sh"


def _pack(pieces: Path, name: str, files: dict[str, str], piece_bytes: int = 300) -> None:
    """`name`.tar.xz.part-NN and their lines in SHA256SUMS, as the pack script writes them."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{path}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    blob = buffer.getvalue()
    pieces.mkdir(exist_ok=True)
    lines = []
    for index, start in enumerate(range(0, len(blob), piece_bytes)):
        piece = pieces / f"{name}.tar.xz.part-{index:02d}"
        piece.write_bytes(blob[start : start + piece_bytes])
        lines.append(f"{hashlib.sha256(piece.read_bytes()).hexdigest()}  {piece.name}\n")
    with (pieces / "SHA256SUMS").open("a") as sums:
        sums.writelines(lines)


SERVE = {
    "ray/__init__.py": "version = '2.58.0'\n" + "# padding\n" * 200,
    "extra.pth": "dsl_packages\n",
    "dsl_packages/cutlass_stub.py": "X = 1\n",
    "bin/ray": "#!/build/venv/bin/python3.12\nprint('ray')\n",
    "bin/serve": "#!/bin/sh\n'''exec' /build/venv/bin/python3.12 \"$0\" \"$@\"\n' '''\nprint('serve')\n",
}


def _install(target: Path, pieces: Path, **env_vars: str) -> subprocess.CompletedProcess:
    # The test's own pieces are the ones vouched for, unless a test says otherwise.
    trusted = env_vars.pop("trusted", None) or pieces / "SHA256SUMS"
    env = {**os.environ, "REHEARSAL_PYTHON": sys.executable, "REHEARSAL_TRUSTED_SUMS": str(trusted), **env_vars}
    return subprocess.run(
        ["bash", str(INSTALL), str(target), str(pieces)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def packed(tmp_path):
    pieces = tmp_path / "pieces"
    _pack(pieces, "serve", SERVE)
    _pack(pieces, "bench", {"aiperf/__init__.py": "", "bin/aiperf": "#!/build/venv/bin/python3.12\n"})
    assert len(list(pieces.glob("serve.tar.xz.part-*"))) > 1  # really in pieces
    return pieces


def test_unpacks_every_tree_and_prints_only_shell_lines(tmp_path, packed):
    target = tmp_path / "site"
    done = _install(target, packed)
    assert done.returncode == 0, done.stderr
    assert (target / "serve" / "ray" / "__init__.py").read_text() == SERVE["ray/__init__.py"]
    exports = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    assert sorted(exports) == [
        (
            f"export PYTHONPATH={target}/serve:{target}/serve/dsl_packages${{PYTHONPATH:+:$PYTHONPATH}} "
            f"PATH={target}/serve/bin:$PATH"
        ),
        f"export REHEARSAL_BENCH_PATH={target}/bench REHEARSAL_AIPERF={target}/bench/bin/aiperf",
    ]


def test_the_trees_get_bytecode_of_this_hosts_python_once_at_unpack(tmp_path, packed):
    # the pieces carry sources only; under PYTHONDONTWRITEBYTECODE every process would compile them again
    target = tmp_path / "site"
    done = _install(target, packed, PYTHONDONTWRITEBYTECODE="1")
    assert done.returncode == 0, done.stderr
    tag = sys.implementation.cache_tag
    assert (target / "serve" / "ray" / "__pycache__" / f"__init__.{tag}.pyc").is_file()
    assert (target / "serve" / "dsl_packages" / "__pycache__" / f"cutlass_stub.{tag}.pyc").is_file()
    assert "serve: 5 files unpacked" in done.stderr  # counted before the bytecode


def test_console_scripts_run_this_hosts_python(tmp_path, packed):
    target = tmp_path / "site"
    assert _install(target, packed).returncode == 0
    assert (target / "serve" / "bin" / "ray").read_text().splitlines()[0] == f"#!{sys.executable}"
    assert (target / "serve" / "bin" / "serve").read_text().splitlines()[1].startswith(f"'''exec' {sys.executable} ")
    ran = subprocess.run(
        [str(target / "serve" / "bin" / "ray")], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.stdout == "ray\n"


def test_a_second_run_leaves_what_it_unpacked(tmp_path, packed):
    target = tmp_path / "site"
    assert _install(target, packed).returncode == 0
    marker = target / "serve" / "left-here"
    marker.write_text("")
    again = _install(target, packed)
    assert again.returncode == 0 and marker.exists()
    assert "serve: already unpacked from these pieces" in again.stderr


def test_a_damaged_piece_is_one_line_and_exit_1(tmp_path, packed):
    piece = packed / "serve.tar.xz.part-01"
    piece.write_bytes(b"x" + piece.read_bytes()[1:])
    done = _install(tmp_path / "site", packed)
    assert done.returncode == 1 and done.stdout == ""  # nothing to eval; progress lines before the error
    assert done.stderr.strip().splitlines()[-1] == (
        "rehearsal_install: serve: checksum mismatch: serve.tar.xz.part-01: FAILED (pieces damaged or from another pack)"
    )


def test_a_missing_piece_is_one_line_and_exit_1(tmp_path, packed):
    (packed / "serve.tar.xz.part-01").unlink()
    done = _install(tmp_path / "site", packed)
    assert done.returncode == 1 and done.stdout == ""
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("rehearsal_install: serve: 1 of ") and line.endswith("serve.tar.xz.part-01")


def test_a_tree_none_of_whose_pieces_came_is_skipped(tmp_path, packed):
    for piece in packed.glob("bench.tar.xz.part-*"):
        piece.unlink()
    done = _install(tmp_path / "site", packed)
    assert done.returncode == 0
    assert "bench: none of its" in done.stderr and "REHEARSAL_BENCH_PATH" not in done.stdout


def test_a_tree_of_debian_packages_is_unpacked_and_named_by_its_folder(tmp_path, packed):
    # serving_lab/pins/libfabric.debs makes `libfabric` a known tree (serving_lab/scripts/rehearsal_debs.sh packs it): libraries and
    # tools, no Python, so its line names the folder (ops rehearse --libfabric reads REHEARSAL_LIBFABRIC)
    _pack(
        packed, "libfabric", {"lib/libfabric.so.1": "\x7fELF stand-in", "bin/fi_info": "\x7fELF stand-in", "DEBS": ""}
    )
    target = tmp_path / "site"
    done = _install(target, packed)
    assert done.returncode == 0, done.stderr
    assert (target / "libfabric" / "lib" / "libfabric.so.1").is_file()
    assert f"export REHEARSAL_LIBFABRIC={target}/libfabric" in done.stdout.splitlines()
    assert "REHEARSAL_LIBFABRIC_PATH" not in done.stdout
    assert (target / "libfabric" / "bin" / "fi_info").read_text() == "\x7fELF stand-in"  # not a console script


def test_a_built_tree_is_named_by_its_folder_with_a_variable_the_shell_accepts(tmp_path, packed):
    # serving_lab/pins/libfabric-cuda.build makes `libfabric-cuda` a known tree (rehearsal_build.sh packs it): its
    # variable has the hyphen as an underscore, REHEARSAL_LIBFABRIC_CUDA, which ops rehearse --libfabric reads
    _pack(packed, "libfabric-cuda", {"lib/libfabric.so.1": "\x7fELF stand-in", "BUILD": ""})
    target = tmp_path / "site"
    done = _install(target, packed)
    assert done.returncode == 0, done.stderr
    assert f"export REHEARSAL_LIBFABRIC_CUDA={target}/libfabric-cuda" in done.stdout.splitlines()
    shell = subprocess.run(
        ["bash", "-c", done.stdout + "\necho $REHEARSAL_LIBFABRIC_CUDA"], check=False, capture_output=True, text=True
    )
    assert shell.stdout.strip().splitlines()[-1] == f"{target}/libfabric-cuda"


def test_every_build_list_pins_its_source_and_wheels_by_sha256():
    (path,) = sorted((ROOT / "serving_lab" / "pins").glob("*.build"))
    lines = [line.split() for line in path.read_text().splitlines() if line and not line.startswith("#")]
    kinds = [line[0] for line in lines]
    assert kinds.count("source") == 1 and kinds.count("configure") == 1 and "wheel" in kinds
    for line in lines:
        if line[0] in ("source", "wheel"):
            assert len(line) == 3 and re.fullmatch(r"[0-9a-f]{64}", line[2]), line
    assert {line[1] for line in lines if line[0] == "wheel"} >= {"nvidia-cuda-runtime==13.0.96"}  # the host's torch's
    configure = next(line for line in lines if line[0] == "configure")
    assert "--with-cuda=CUDA" in configure and "--enable-cuda-dlopen" in configure and "--enable-tcp=yes" in configure


BUILD = ROOT / "serving_lab" / "scripts" / "rehearsal_build.sh"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("source ftp://example.org/x.tar.xz " + "0" * 64, "not 'source URL SHA256'"),
        ("source http://example.org/x.tar.xz 1234", "not 'source URL SHA256'"),
        ("wheel nvidia-cuda-runtime 13.0.96 " + "0" * 64, "not 'wheel NAME==VERSION SHA256'"),
        ("configure --prefix=/x; rm -rf /", "the configure line holds characters other than options"),
        ("patch fix.diff", "unknown line 'patch' (allowed: source, wheel, configure)"),
    ],
)
def test_a_build_list_line_out_of_form_is_refused_in_one_line_before_any_download(tmp_path, line, said):
    scripts = tmp_path / "serving_lab" / "scripts"
    scripts.mkdir(parents=True)
    for script in (BUILD, BUILD.parent / "pieces.sh"):
        (scripts / script.name).write_text(script.read_text())
    (tmp_path / "serving_lab" / "pins").mkdir()
    good = ["source http://example.org/x.tar.xz " + "0" * 64, "configure --enable-tcp=yes"]
    (tmp_path / "serving_lab" / "pins" / "probe.build").write_text("\n".join([*good, line]) + "\n")
    done = subprocess.run(
        ["bash", str(scripts / BUILD.name), "probe"], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and done.stdout == ""
    # the lists are read before the build tools are looked for, so this holds on a machine without them too
    (message,) = done.stderr.strip().splitlines()
    assert message.startswith(f"rehearsal_build: serving_lab/pins/probe.build: {said}")
    assert not (tmp_path / ".rehearsal").exists()  # nothing downloaded, nothing made


def test_every_debian_list_pins_each_package_by_the_sha256_of_its_deb():
    lists = sorted((ROOT / "serving_lab" / "pins").glob("*.debs"))
    assert [p.stem for p in lists] == ["libfabric"]
    for path in lists:
        text = path.read_text()
        assert "#: suite trixie" in text and "#: mirror http://deb.debian.org/debian" in text
        lines = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
        assert lines and all(len(parts) == 3 and len(parts[2]) == 64 for parts in lines)
        names = [parts[0] for parts in lines]
        assert names == sorted(names) and len(set(names)) == len(names)
        assert not (ROOT / "serving_lab" / "pins" / f"{path.stem}.lock").exists()
    names = {
        line.split()[0]
        for line in (ROOT / "serving_lab" / "pins" / "libfabric.debs").read_text().splitlines()
        if line and not line.startswith("#")
    }
    # trixie's libnuma 2.0.19 made NIXL's LIBFABRIC backend exit on the H200 host: the host's own is used
    assert "libfabric1" in names and "libnuma1" not in names


def test_the_committed_digests_vouch_for_one_libfabric_piece():
    pieces = [line.split()[1] for line in (ROOT / "serving_lab" / "pins" / "pieces.sha256").read_text().splitlines()]
    assert [p for p in pieces if p.startswith("libfabric.")] == ["libfabric.tar.xz.part-00"]


DEBS = ROOT / "serving_lab" / "scripts" / "rehearsal_debs.sh"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("libfabric1 2.1.0-1.1 abc\n", "needs '#: suite NAME' and '#: mirror URL' lines"),
        (
            "#: suite trixie\n#: mirror http://deb.debian.org/debian\nlibfabric1 2.1.0-1.1 abc\n",
            "not 'package version sha256'",
        ),
        ("#: suite trixie\n#: mirror http://deb.debian.org/debian\n", "lists no package"),
    ],
)
def test_the_deb_packer_refuses_a_bad_list_before_downloading(tmp_path, text, message):
    # a copy of the scripts and a list of its own: the packer never reaches apt-get or the mirror
    (tmp_path / "serving_lab" / "scripts").mkdir(parents=True)
    (tmp_path / "serving_lab" / "scripts" / "rehearsal_debs.sh").write_text(DEBS.read_text())
    (tmp_path / "serving_lab" / "scripts" / "pieces.sh").write_text((DEBS.parent / "pieces.sh").read_text())
    (tmp_path / "serving_lab" / "pins").mkdir()
    (tmp_path / "serving_lab" / "pins" / "probe.debs").write_text(text)
    keyring = tmp_path / "keyring.gpg"
    keyring.write_bytes(b"")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("apt-get", "dpkg-deb"):  # present, and failing loudly if ever run
        (tools / tool).write_text("#!/bin/sh\necho ran >&2; exit 99\n")
        (tools / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:/usr/bin:/bin", "REHEARSAL_DEB_KEYRING": str(keyring)}
    done = subprocess.run(
        ["bash", str(tmp_path / "serving_lab" / "scripts" / "rehearsal_debs.sh"), "probe"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "ran" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]


DEVICE_RUN = ROOT / "serving_lab" / "scripts" / "rehearsal_device_run.sh"


def _device_run(
    tmp_path: Path,
    pieces: Path,
    out: Path,
    *argv: str,
    cache: Path | None = None,
    bin_dir: Path | None = None,
    env_vars: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """serving_lab/scripts/rehearsal_device_run.sh ARGV with its folders under tmp_path; `bin_dir` first on PATH
    (default: this Python's, whose `python3` runs the real `ops rehearse`)."""
    env = {
        **os.environ,
        "OUT": str(out),
        "REHEARSAL_PIECES": str(pieces),
        "REHEARSAL_SITE": str(tmp_path / "site"),
        "REHEARSAL_TRUSTED_SUMS": str(pieces / "SHA256SUMS"),
        "TRITON_CACHE_DIR": str(cache or tmp_path / "cache" / "triton"),
        "REHEARSAL_PYTHON": sys.executable,
        "PATH": f"{bin_dir or Path(sys.executable).parent}:/usr/bin:/bin",
        **(env_vars or {}),
    }
    return subprocess.run(
        ["bash", str(DEVICE_RUN), *argv], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_the_device_wrapper_refuses_bad_usage_with_one_line(tmp_path):
    for argv, env in ((["pd"], {}), ([], {"OUT": str(tmp_path)}), (["a b"], {"OUT": str(tmp_path)})):
        done = subprocess.run(
            ["bash", str(DEVICE_RUN), *argv],
            capture_output=True,
            text=True,
            timeout=60,
            env={**{k: v for k, v in os.environ.items() if k != "OUT"}, **env},
            check=False,
        )
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, (argv, done.stderr)


def test_the_device_wrapper_installs_runs_ops_rehearse_and_leaves_the_output_in_out(tmp_path):
    # End to end on this CPU machine: the pieces unpack, `python3 -m ops rehearse` runs with the unpacked
    # trees on its path and stops with its own one-line error (no nvidia-smi here), and the console,
    # the results archive and the install log are in $OUT.
    pieces, out = tmp_path / "pieces", tmp_path / "out"
    _pack(pieces, "serve", {"placeholder.py": ""})
    _pack(pieces, "bench", {"aiperf/__init__.py": "", "bin/aiperf": "#!/build/venv/bin/python3.12\n"})
    done = _device_run(tmp_path, pieces, out, "pd-test", "--stage", "dev", "--mode", "pd")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "rehearsal_device_run: pd-test: exit 1 (done)"
    console = (out / "pd-test.log").read_text().strip().splitlines()
    assert console[-1].startswith("rehearse: ") and "nvidia-smi" in console[-1]
    assert (out / "pd-test.tgz").stat().st_size > 0 and (out / "install.log").exists()
    assert not (out / "triton-cache.tgz").exists()  # nothing was compiled


def test_the_device_wrapper_runs_the_graph_arms_command_when_asked(tmp_path):
    # the same environment, the graph arms' own one-line error (no nvidia-smi here) in the console
    pieces, out = tmp_path / "pieces", tmp_path / "out"
    _pack(pieces, "serve", {"placeholder.py": ""})
    _pack(pieces, "bench", {"aiperf/__init__.py": "", "bin/aiperf": "#!/build/venv/bin/python3.12\n"})
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text("{}")
    argv = ("arms-test", "--stage", "dev", "--weights", str(weights), "--arms", "today")
    done = _device_run(tmp_path, pieces, out, *argv, env_vars={"REHEARSAL_COMMAND": "graph-arms"})
    assert done.returncode == 1, done.stdout + done.stderr
    console = (out / "arms-test.log").read_text().strip().splitlines()
    assert console[-1].startswith("graph_arms: ") and "nvidia-smi" in console[-1]


def test_the_device_wrapper_refuses_a_command_it_does_not_know_before_any_work(tmp_path):
    done = _device_run(tmp_path, tmp_path / "pieces", tmp_path / "out", "x", env_vars={"REHEARSAL_COMMAND": "bash"})
    assert done.returncode == 2
    assert done.stderr.strip() == "rehearsal_device_run: REHEARSAL_COMMAND: 'bash' (allowed: rehearse, graph-arms)"
    assert not (tmp_path / "site").exists()


def test_the_device_wrapper_seeds_an_empty_triton_cache_from_an_earlier_runs_archive(tmp_path):
    pieces, out, cache = tmp_path / "pieces", tmp_path / "out", tmp_path / "cache"
    _pack(pieces, "serve", {"placeholder.py": ""})
    (cache / "triton" / "abc").mkdir(parents=True)
    (cache / "triton" / "abc" / "kernel.cubin").write_text("compiled")
    subprocess.run(["tar", "czf", str(cache / "triton-cache.tgz"), "-C", str(cache), "triton"], check=True)
    (cache / "triton" / "abc" / "kernel.cubin").unlink()
    (cache / "triton" / "abc").rmdir()
    done = _device_run(tmp_path, pieces, out, "seeded", "--stage", "dev", "--mode", "pd", cache=cache / "triton")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Triton cache seeded from" in done.stderr
    assert (cache / "triton" / "abc" / "kernel.cubin").read_text() == "compiled"
    assert (out / "triton-cache.tgz").stat().st_size > 0  # and packed again for the next host


def test_the_device_wrapper_seeds_an_empty_flashinfer_cache_and_packs_it_again(tmp_path):
    # FlashInfer's JIT folder (FLASHINFER_WORKSPACE_BASE/.cache/flashinfer: flashinfer/jit/env.py) is kept like
    # Triton's: seeded from an earlier host's archive, packed for the next one.
    pieces, out, cache = tmp_path / "pieces", tmp_path / "out", tmp_path / "cache"
    _pack(pieces, "serve", {"placeholder.py": ""})
    built = tmp_path / "earlier" / "flashinfer" / "90a" / "cached_ops" / "sampling"
    built.mkdir(parents=True)
    (built / "sampling.so").write_text("compiled")
    cache.mkdir()
    subprocess.run(
        ["tar", "czf", str(cache / "flashinfer-cache.tgz"), "-C", str(tmp_path / "earlier"), "flashinfer"], check=True
    )
    done = _device_run(tmp_path, pieces, out, "seeded", "--stage", "dev", "--mode", "pd", cache=cache / "triton")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FlashInfer cache seeded from" in done.stderr
    home = cache / "flashinfer-home" / ".cache" / "flashinfer"
    assert (home / "90a" / "cached_ops" / "sampling" / "sampling.so").read_text() == "compiled"
    with tarfile.open(out / "flashinfer-cache.tgz") as packed:
        assert "flashinfer/90a/cached_ops/sampling/sampling.so" in packed.getnames()


def test_the_device_wrapper_leaves_no_flashinfer_archive_when_nothing_was_compiled(tmp_path):
    pieces, out = tmp_path / "pieces", tmp_path / "out"
    _pack(pieces, "serve", {"placeholder.py": ""})
    done = _device_run(tmp_path, pieces, out, "cold", "--stage", "dev", "--mode", "pd")
    assert done.returncode == 1, done.stdout + done.stderr
    assert not (out / "flashinfer-cache.tgz").exists()


FAKE_REHEARSE = """#!/bin/sh
# stands in for `python3 -m ops rehearse ... --out DIR`: writes what a benchmark run leaves
while [ $# -gt 0 ]; do [ "$1" = --out ] && out=$2; shift; done
level="$out/dev/runs/dev/run-pd/long-prompt-c64"
mkdir -p "$level"
echo '{"label": "pd"}' > "$out/dev/runs/dev/run-pd.json"
echo '{"summary": 1}' > "$level/profile_export_aiperf.json"
echo 'a,b' > "$level/profile_export_aiperf.csv"
echo '{"request": 1}' > "$level/profile_export.jsonl"
[ -n "$FAKE_RECORDS_BYTES" ] && head -c "$FAKE_RECORDS_BYTES" /dev/urandom >> "$level/profile_export.jsonl"
head -c 20000000 /dev/urandom > "$level/inputs.json"
exit 0
"""


def _fake_rehearse_run(tmp_path: Path, **env_vars: str) -> tuple[subprocess.CompletedProcess, Path]:
    pieces, out, fake = tmp_path / "pieces", tmp_path / "out", tmp_path / "fakebin"
    _pack(pieces, "serve", {"placeholder.py": ""})
    fake.mkdir()
    (fake / "python3").write_text(FAKE_REHEARSE)
    (fake / "python3").chmod(0o755)
    return _device_run(tmp_path, pieces, out, "pd", "--stage", "dev", bin_dir=fake, env_vars=env_vars), out


def test_the_device_wrapper_brings_back_results_apart_from_records_and_never_aiperfs_prompts(tmp_path):
    # a colocated run on the H200 pair lost its results: aiperf's generated prompts made the archive
    # larger than the 16 MiB a file that comes back from the lent host
    import tarfile as tar_module

    done, out = _fake_rehearse_run(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    with tar_module.open(out / "pd.tgz") as results:
        names = {Path(n).name for n in results.getnames()}
    assert {"run-pd.json", "profile_export_aiperf.json"} <= names
    assert not names & {"inputs.json", "profile_export_aiperf.csv", "profile_export.jsonl"}
    with tar_module.open(out / "pd-records.tgz") as records:
        assert [Path(n).name for n in records.getnames() if n.endswith(".jsonl")] == ["profile_export.jsonl"]


def test_an_archive_over_16_mib_is_removed_with_a_line_and_the_results_still_come_back(tmp_path):
    done, out = _fake_rehearse_run(tmp_path, FAKE_RECORDS_BYTES=str(17 * 1024 * 1024))  # random: no compression
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rehearsal_device_run: pd-records.tgz is over 16 MiB and would not come back: removed" in done.stderr
    assert not (out / "pd-records.tgz").exists()
    assert (out / "pd.tgz").stat().st_size > 0


def _trusted_copy(tmp_path: Path, pieces: Path) -> Path:
    copy = tmp_path / "trusted.sha256"
    copy.write_text((pieces / "SHA256SUMS").read_text())
    return copy


@pytest.mark.parametrize(
    "line",
    [
        "{sum}  ../../etc.tar.xz.part-00",  # a tree name that climbs out of the target
        "{sum}  serve/../../x.tar.xz.part-00",
        "{sum}  unknown.tar.xz.part-00",  # a tree this checkout has no lock for
        "{sum}  serve.tar.xz.part-00 extra",
        "{sum}  /tmp/serve.tar.xz.part-00",
        "{sum}  serve.tar.xz.part-0a",
        "{sum}  serve.tar.gz.part-00",
        "{sum} *serve.tar.xz.part-00",
        "not-a-digest  serve.tar.xz.part-00",
        "{sum}  se$(touch pwned)rve.tar.xz.part-00",
    ],
)
def test_a_sums_line_that_names_no_piece_of_a_known_tree_is_refused_before_anything_is_removed(tmp_path, packed, line):
    target = tmp_path / "site"
    (target / "keep").mkdir(parents=True)
    trusted = _trusted_copy(tmp_path, packed)
    with (packed / "SHA256SUMS").open("a") as sums:
        sums.write(line.format(sum="0" * 64) + "\n")
    result = _install(target, packed, trusted=str(trusted))
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "refused" in result.stderr
    assert (target / "keep").is_dir() and not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_a_piece_the_checkout_does_not_vouch_for_is_refused(tmp_path, packed):
    trusted = tmp_path / "trusted.sha256"
    trusted.write_text(
        "".join(
            line
            for line in (packed / "SHA256SUMS").read_text().splitlines(keepends=True)
            if "serve.tar.xz.part-00" not in line
        )
    )
    result = _install(tmp_path / "site", packed, trusted=str(trusted))
    assert result.returncode == 1
    assert result.stderr.strip().endswith(
        "(a piece this checkout does not vouch for: repack, or carry the checkout it was packed with)"
    )
    assert result.stderr.startswith("rehearsal_install: serve.tar.xz.part-00: its digest is not in ")


def test_without_the_committed_digests_nothing_is_installed(tmp_path, packed):
    result = _install(tmp_path / "site", packed, trusted=str(tmp_path / "absent.sha256"))
    assert result.returncode == 1 and "the digests of the pieces this checkout vouches for" in result.stderr


def _one_refusal(done: subprocess.CompletedProcess, folder: Path, why: str) -> None:
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rehearsal_install: target ")
    assert f": {folder} {why}" in lines[0]


def test_a_target_under_a_folder_others_can_write_is_refused(tmp_path, packed):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # world-writable, not sticky: anyone may rename site/ and put their own tree there
    done = _install(shared / "site", packed)
    _one_refusal(done, shared, "is writable by others (mode 777)")
    assert not (shared / "site" / "serve").exists()


def test_a_target_others_can_write_is_refused_even_when_sticky(tmp_path, packed):
    target = tmp_path / "site"
    target.mkdir()
    target.chmod(0o1777)
    _one_refusal(_install(target, packed), target, "is writable by others (mode 1777)")
    target.chmod(0o775)
    _one_refusal(_install(target, packed), target, "is writable by others (mode 775)")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user owns needs root")
def test_a_target_another_user_owns_is_refused(tmp_path, packed):
    target = tmp_path / "site"
    target.mkdir(mode=0o755)
    os.chown(target, 65534, 65534)
    _one_refusal(_install(target, packed), target, "belongs to uid 65534, not to you or root")


def test_a_sticky_root_owned_parent_like_tmp_is_accepted(tmp_path, packed):
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    if sticky.stat().st_uid != 0:
        pytest.skip("the sticky parent must be root's, as /tmp is")
    done = _install(sticky / "site", packed)
    assert done.returncode == 0, done.stderr
    assert (sticky / "site").stat().st_mode & 0o777 == 0o700  # made private


def test_the_default_target_is_a_private_folder_in_home(tmp_path, packed):
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    env = {**os.environ, "HOME": str(home), "REHEARSAL_PYTHON": sys.executable}
    env.pop("REHEARSAL_SITE", None)
    env.pop("XDG_CACHE_HOME", None)
    env["REHEARSAL_TRUSTED_SUMS"] = str(packed / "SHA256SUMS")
    done = subprocess.run(
        ["bash", str(INSTALL), str(packed)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    site = home / ".cache" / "rehearsal-site"
    assert (site / "serve" / "ray" / "__init__.py").is_file()
    assert site.stat().st_mode & 0o777 == 0o700
    assert f"PATH={site}/serve/bin:$PATH" in done.stdout
