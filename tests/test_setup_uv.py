"""scripts/setup.sh's installer: uv at the version setup.sh pins, installed once per machine into the user cache,
and the pip settings of the environment passed on to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT

SETUP = (ROOT / "scripts" / "setup.sh").read_text()
UV_VERSION = re.search(r"^UV_VERSION=(\S+)$", SETUP, re.MULTILINE).group(1)  # type: ignore[union-attr]


def _functions(*names: str) -> str:
    found = [re.search(rf"(?ms)^{name}\(\) \{{.*?^\}}$", SETUP) for name in names]
    return "\n".join(match.group(0) for match in found if match)


def _setup_lines(*names: str) -> str:
    """setup.sh's installer settings and the named functions, exactly as it defines them."""
    (settings,) = re.findall(r"(?ms)^PIP_VERSION=.*?^uv=.*?$", SETUP)
    return f"set -euo pipefail\npython={sys.executable}\n{settings}\n{_functions(*names)}\n"


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False)


def _without_pip_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_")) and k != "SSL_CERT_FILE"}


def test_the_installed_uv_is_the_pinned_version():
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    uv = cache / "pd-inference" / f"uv-{UV_VERSION}" / "uv"
    version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert version.split()[:2] == ["uv", UV_VERSION]


def test_uv_is_installed_once_and_only_the_finished_binary_is_kept(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    script = _setup_lines("ensure_uv") + "ensure_uv\nensure_uv\n"
    run = _bash(script, env)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count(f"installing uv {UV_VERSION}") == 1
    folder = tmp_path / "pd-inference" / f"uv-{UV_VERSION}"
    assert [p.name for p in folder.iterdir()] == ["uv"]
    version = subprocess.run([folder / "uv", "--version"], capture_output=True, text=True, check=True, timeout=60)
    assert version.stdout.split()[:2] == ["uv", UV_VERSION]


def test_a_failed_install_of_uv_leaves_nothing_in_the_cache_folder(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(tmp_path))  # nothing to install from: pip fails at once
    run = _bash(_setup_lines("ensure_uv") + "ensure_uv\n", env)
    assert run.returncode == 1
    assert list((tmp_path / "pd-inference" / f"uv-{UV_VERSION}").iterdir()) == []


def _fake_uv_environment(tmp_path: Path, **settings: str) -> dict[str, str]:
    """What uv_install hands uv, read back by an executable at uv's path that prints its environment."""
    uv = tmp_path / "pd-inference" / f"uv-{UV_VERSION}" / "uv"
    uv.parent.mkdir(parents=True)
    uv.write_text("#!/bin/sh\nenv\n")
    uv.chmod(0o755)
    env = {**_without_pip_settings(), "XDG_CACHE_HOME": str(tmp_path), **settings}
    run = _bash(_setup_lines("ensure_uv", "uv_install") + "uv_install .venv -r requirements.txt\n", env)
    assert run.returncode == 0, run.stderr
    return dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)


def test_a_pip_index_and_certificate_reach_uv(tmp_path):
    seen = _fake_uv_environment(tmp_path, PIP_INDEX_URL="https://mirror.example/simple", PIP_CERT="/etc/ca.pem")
    assert (seen["UV_DEFAULT_INDEX"], seen["SSL_CERT_FILE"]) == ("https://mirror.example/simple", "/etc/ca.pem")


def test_uvs_own_settings_win_over_pips(tmp_path):
    seen = _fake_uv_environment(
        tmp_path,
        PIP_INDEX_URL="https://pip.example/simple",
        UV_DEFAULT_INDEX="https://uv.example/simple",
        PIP_CERT="/etc/pip.pem",
        SSL_CERT_FILE="/etc/uv.pem",
    )
    assert (seen["UV_DEFAULT_INDEX"], seen["SSL_CERT_FILE"]) == ("https://uv.example/simple", "/etc/uv.pem")


def test_without_pip_settings_uv_keeps_its_defaults(tmp_path):
    seen = _fake_uv_environment(tmp_path)
    assert "UV_DEFAULT_INDEX" not in seen and "SSL_CERT_FILE" not in seen
    assert seen["UV_PYTHON_DOWNLOADS"] == "never"


def test_uv_trusts_the_systems_certificates_as_pip_does(tmp_path):
    assert _fake_uv_environment(tmp_path)["UV_SYSTEM_CERTS"] == "true"
