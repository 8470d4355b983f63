"""scripts/setup.sh's fresh_venv: a venv made in another folder (a moved or copied checkout) is made again, since
its scripts' shebangs and the editable install point at the old folder; one made here is kept."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

from .helpers import ROOT


def _fresh_venv(folder) -> None:
    """Runs the function exactly as setup.sh defines it, in `folder`."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    (function,) = re.findall(r"(?ms)^fresh_venv\(\) \{.*?^\}$", text)
    script = f"set -euo pipefail\npython={sys.executable}\n{function}\nfresh_venv .venv\n"
    subprocess.run(["bash", "-c", script], cwd=folder, check=True, timeout=120)


def test_a_venv_made_here_is_kept_and_records_its_folder(tmp_path):
    checkout = tmp_path / "a"
    checkout.mkdir()
    _fresh_venv(checkout)
    made = (checkout / ".venv" / "pyvenv.cfg").stat().st_ino
    _fresh_venv(checkout)
    assert (checkout / ".venv" / ".setup-checkout").read_text() == f"{checkout}\n"
    assert (checkout / ".venv" / "pyvenv.cfg").stat().st_ino == made


def test_a_moved_checkouts_venv_is_made_again_for_its_new_folder(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    _fresh_venv(old)
    (old / ".venv" / "bin" / "stale-script").write_text(f"#!{old}/.venv/bin/python\n")
    shutil.move(old, new)
    _fresh_venv(new)
    assert (new / ".venv" / ".setup-checkout").read_text() == f"{new}\n"
    assert not (new / ".venv" / "bin" / "stale-script").exists()
    assert subprocess.run([new / ".venv" / "bin" / "python", "-c", "0"], check=False).returncode == 0


def test_a_venv_from_before_the_record_is_made_again(tmp_path):
    (tmp_path / ".venv").mkdir()  # no .setup-checkout: its folder is not known
    (tmp_path / ".venv" / "leftover").write_text("")
    _fresh_venv(tmp_path)
    assert not (tmp_path / ".venv" / "leftover").exists()
