"""Shared test helpers: stage configs with overrides, in-process synth, template access."""

from __future__ import annotations

import copy
import functools
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from config import load_stage_file
from config.loader import CONFIG_DIR
from config.schema import StageConfig
from stacks import assembly
from stacks.stage import InferenceStage

ROOT = Path(__file__).resolve().parent.parent
REHEARSAL = ROOT / "serving_lab" / "pins"  # the GPU rehearsal's committed data (the model's config.json, its sources)
LARGER_MODEL_EXAMPLE = ROOT / "docs" / "larger-model.example.yaml"


def data_file(path: Path) -> Path:
    """A file of the repository's committed reference data (the model's config.json) that these checks
    validate against. Missing is a failure with a clear reason, not a skip. Upstream data that may not be
    committed (KubeRay's CRDs, the charts' default values) comes from tests/reference_data.py."""
    if not path.is_file():
        import pytest

        pytest.fail(f"{path} is missing: it is committed data of this repository (its source is recorded beside it)")
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without AWS or CDK variables (no credentials, no context), plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null", **extra
    )
    return env


def pid_alive(pid: int) -> bool:
    """Whether a process of that id exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def survivors(pids: list[int], within: float) -> list[int]:
    """The processes of `pids` still there after waiting up to `within` seconds for them to end."""
    deadline = time.monotonic() + within
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if pid_alive(pid)]


def kill_survivors(pids: list[int]) -> None:
    """A test's clean-up: whatever of `pids` outlived it is killed."""
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def stage_data(stage: str = "dev") -> dict[str, Any]:
    """The committed stage file's data, a copy of its own for each caller to change."""
    return copy.deepcopy(_committed_stage(stage))


@functools.cache
def _committed_stage(stage: str) -> dict[str, Any]:
    # Parsed once a session: pure-Python YAML takes ~40 ms a file, and the bad-input campaign asks 3,600 times.
    return yaml.safe_load((CONFIG_DIR / f"{stage}.yaml").read_text())


def larger_model(folder: Path) -> StageConfig:
    """docs/larger-model.example.yaml as a user takes it: copied into a folder as <stage>.yaml and loaded."""
    path = folder / "larger-model.yaml"
    path.write_text(LARGER_MODEL_EXAMPLE.read_text())
    return load_stage_file(path, warn=lambda line: None)


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Deep merge; a value of `DELETE` removes the key."""
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is DELETE:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


DELETE = object()


def write_stage(folder: Path, data: dict[str, Any] | str, name: str | None = None) -> Path:
    """Write a stage file named after its `stage` (or `name`) into folder."""
    if isinstance(data, str):
        text, stem = data, name or "bad"
    else:
        text, stem = yaml.safe_dump(data, sort_keys=False), name or str(data.get("stage", "bad"))
    path = folder / f"{stem}.yaml"
    path.write_text(text)
    return path


def config_with(tmp_path: Path, stage: str = "dev", **overrides: Any) -> StageConfig:
    """The named stage's file with overrides, loaded through the real loader and rules."""
    return load_stage_file(write_stage(tmp_path, merge(stage_data(stage), overrides)))


@dataclass
class Synth:
    stages: dict[str, InferenceStage]
    outdir: Path

    def template(self, stage: str, stack: str) -> dict[str, Any]:
        built = self.stages[stage]
        artifact = getattr(built, stack).artifact_id
        return json.loads((self.outdir / f"assembly-{stage}" / f"{artifact}.template.json").read_text())

    def resources(self, stage: str, stack: str, kind: str) -> dict[str, dict[str, Any]]:
        return {name: res for name, res in self.template(stage, stack)["Resources"].items() if res["Type"] == kind}

    def one(self, stage: str, stack: str, kind: str, **match: Any) -> dict[str, Any]:
        """The single resource of `kind` whose Properties contain `match` (top-level keys)."""
        found = [
            res
            for res in self.resources(stage, stack, kind).values()
            if all(res.get("Properties", {}).get(k) == v for k, v in match.items())
        ]
        assert len(found) == 1, f"expected one {kind} matching {match}, found {len(found)}"
        return found[0]


def synth(configs: list[StageConfig], outdir: Path) -> Synth:
    app = assembly.new_app(outdir=str(outdir))
    built = assembly.build(app, configs)
    app.synth()
    return Synth(stages={stage.cfg.stage: stage for stage in built}, outdir=outdir)


def one_error_line(capsys) -> str:
    """The one line a command printed to stderr (nothing on stdout, no traceback)."""
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def refusal(tmp_path: Path, change: dict[str, Any], name: str = "dev") -> str:
    """The one-line ConfigError that dev's stage file with `change` merged in gets (written as `name`.yaml),
    naming that file first."""
    import pytest

    from config import ConfigError

    path = write_stage(tmp_path, merge(stage_data("dev"), change), name=name)
    with pytest.raises(ConfigError) as caught:
        load_stage_file(path)
    line = str(caught.value)
    assert line.startswith(f"{path}: ") and "\n" not in line, line
    return line
