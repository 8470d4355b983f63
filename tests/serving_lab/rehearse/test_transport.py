"""How `ops rehearse` is told to move the KV cache (--nixl-backend, --libfabric, --kv-buffer-device, --engine-env):
the options as the real parser reads them, the plan they make, the label the benchmark results carry, and the
carried libfabric's lib/ put in front of the host's own library path (never instead of it: the driver's is there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ops.__main__ import main
from serving_lab.rehearse import cli, overrides, ray_cluster
from serving_lab.rehearse.host import Gpu, Host

from .arguments import rehearse_args
from .models import ATTENTION_ONLY, with_model_source

ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
L4_WITH_EFA = Host(gpus=(Gpu("NVIDIA L4", 23034, "8.9"),) * 2, efa_devices=("rdmap0s6",))
MODEL = Path("/models/qwen3.5-9b")


def _libfabric_tree(tmp_path: Path) -> Path:
    lib = tmp_path / "libfabric" / "lib"
    lib.mkdir(parents=True)
    (lib / "libfabric.so.1").write_bytes(b"\x7fELF")
    return tmp_path / "libfabric"


def test_the_options_reach_the_plan_as_a_transport(tmp_path):
    tree = _libfabric_tree(tmp_path)
    args = rehearse_args(tmp_path, nixl_backend="LIBFABRIC", libfabric=str(tree), engine_env=[("UCX_TLS", "tcp")])
    transport = cli._transport(args)
    assert transport == overrides.Transport(
        nixl_backend="LIBFABRIC", libfabric=str(tree), engine_env=(("UCX_TLS", "tcp"),)
    )


def test_the_parser_reads_the_transport_options(monkeypatch, tmp_path):
    from ops.__main__ import _parser

    monkeypatch.setenv("REHEARSAL_LIBFABRIC", "/tmp/rehearsal-site/libfabric")
    argv = [
        "rehearse", "--stage", "dev", "--nixl-backend", "LIBFABRIC", "--kv-buffer-device", "cuda",
        "--engine-env", "UCX_TLS=cuda_ipc,cuda_copy,tcp", "--engine-env", "FI_TCP_IFACE=eth0",
    ]  # fmt: skip
    args = _parser(argv=argv).parse_args(argv)
    assert args.libfabric == "/tmp/rehearsal-site/libfabric"  # what serving_lab/scripts/rehearsal_install.sh exports
    assert args.kv_buffer_device == "cuda"
    assert args.engine_env == [("UCX_TLS", "cuda_ipc,cuda_copy,tcp"), ("FI_TCP_IFACE", "eth0")]


@pytest.mark.parametrize("text", ["UCX_TLS", "=x", "1A=b", "A-B=c"])
def test_an_engine_env_that_is_not_name_value_exits_2(text, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["rehearse", "--stage", "dev", "--engine-env", text])
    assert exc.value.code == 2
    assert "(allowed: NAME=VALUE, NAME of A-Z a-z 0-9 _, VALUE printable)" in capsys.readouterr().err


def test_a_libfabric_folder_without_the_library_is_one_line_and_exit_2(tmp_path):
    args = rehearse_args(tmp_path, nixl_backend="LIBFABRIC", libfabric=str(tmp_path / "empty"))
    with pytest.raises(cli.RehearsalError) as exc:
        cli._transport(args)
    assert exc.value.code == 2 and "has no libfabric.so.1" in str(exc.value)


def test_the_libfabric_folder_is_ignored_unless_libfabric_is_kept(tmp_path):
    args = rehearse_args(tmp_path, libfabric=str(tmp_path / "anything"))
    assert cli._transport(args) == overrides.Transport()


@pytest.mark.parametrize(
    ("host", "transport", "label"),
    [
        (ONE_H200, overrides.Transport(), "UCX on one host, not EFA"),
        (
            ONE_H200,
            overrides.Transport(nixl_backend="LIBFABRIC"),
            "LIBFABRIC over libfabric's tcp provider on one host, KV staged in host memory, not EFA",
        ),
        (
            ONE_H200,
            overrides.Transport(nixl_backend="LIBFABRIC", kv_buffer_device="cuda"),
            "LIBFABRIC over libfabric's tcp provider on one host, not EFA",
        ),
        (L4_WITH_EFA, overrides.Transport(), "LIBFABRIC"),
        (L4_WITH_EFA, overrides.Transport(nixl_backend="UCX"), "UCX on an EFA host"),
    ],
)
def test_the_benchmark_note_names_the_transport_that_ran(dev, host, transport, label):
    cfg = with_model_source(dev, ATTENTION_ONLY)  # a host KV buffer is refused for Qwen3.5 (test_overrides.py)
    plan = overrides.plan(
        cfg,
        overrides.PlanRequest(
            mode="pd", host=host, model_dir=MODEL, real_weights=False, share_gpus=True, transport=transport
        ),
    )
    assert cli.transport_label(host, plan) == label


def test_the_carried_library_path_goes_before_the_hosts_own():
    host = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64:/usr/local/nvidia/lib", "PATH": "/usr/bin"}
    merged = ray_cluster.merged_env(host, {"LD_LIBRARY_PATH": "/tmp/rehearsal-site/libfabric/lib", "PATH": "/x"})
    assert (
        merged["LD_LIBRARY_PATH"] == "/tmp/rehearsal-site/libfabric/lib:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
    )
    assert merged["PATH"] == "/x"  # any other variable of the plan replaces the host's
    assert ray_cluster.merged_env({}, {"LD_LIBRARY_PATH": "/a"})["LD_LIBRARY_PATH"] == "/a"
    assert ray_cluster.merged_env(host, {})["LD_LIBRARY_PATH"] == host["LD_LIBRARY_PATH"]


def test_ray_start_gets_the_merged_library_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    seen = {}

    def run(cmd, env, **kwargs):
        seen.update(env)

        class Done:
            returncode, stdout, stderr = 0, "", ""

        return Done()

    head = ray_cluster.RayHead(
        num_gpus=1, env={"LD_LIBRARY_PATH": "/lf/lib"}, temp_dir=tmp_path / "ray", run=run, port_free=lambda port: True
    )
    head.start()
    assert seen["LD_LIBRARY_PATH"] == "/lf/lib:/usr/local/nvidia/lib64"


def test_an_empty_rehearsal_libfabric_means_none(monkeypatch):
    """`REHEARSAL_LIBFABRIC=` set but empty names no tree: argparse runs an option's type on a string default."""
    from ops.__main__ import _parser

    monkeypatch.setenv("REHEARSAL_LIBFABRIC", "")
    argv = ["rehearse", "--stage", "dev"]
    assert _parser(argv=argv).parse_args(argv).libfabric is None
