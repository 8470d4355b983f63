"""evidence/2026-12-01-h200-l4-emulated/emulated_pd.sh refuses bad usage in one line with exit 2, before it
profiles or rehearses anything."""

from __future__ import annotations

import os
import subprocess

import pytest

from ...helpers import ROOT

SCRIPT = ROOT / "evidence" / "2026-12-01-h200-l4-emulated" / "emulated_pd.sh"


def _run(tmp_path, *argv: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("OUT", "KV_CACHE_BYTES", "CALL_DEADLINE_S")}
    return subprocess.run(
        ["bash", str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "OUT": str(tmp_path / "out"), **env},
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["name", "config"], {}, "usage: OUT=DIR"),
        (["name", "no-such-folder", "graphs-text"], {}, "no-such-folder/dev.yaml: no such stage file"),
        (["name", "config", "graphs-text"], {"KV_CACHE_BYTES": "2.6GiB"}, "KV_CACHE_BYTES: '2.6GiB' is not a whole"),
        (["name", "config", "graphs-text"], {"KV_CACHE_BYTES": "0"}, "KV_CACHE_BYTES: '0' is not a whole"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(tmp_path, argv, env, says):
    done = _run(tmp_path, *argv, **env)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr


def test_too_little_time_left_for_the_rehearsal_is_exit_4_before_it_starts(tmp_path):
    done = _run(tmp_path, "name", "config", "graphs-text", KV_CACHE_BYTES="2827682907", CALL_DEADLINE_S="60")
    assert done.returncode == 4 and "s left of CALL_DEADLINE_S: step 2 not run" in done.stderr
    assert not (tmp_path / "out" / "name.log").exists()
