"""app.py: every stage file by default, one with `-c stage=NAME`; a bad stage file stops synth with
the validator's one line and exit code 2, and nothing is written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import app
from config.__main__ import main as validate

from .config.cases import BENCHMARK, FOUNDATION, RAW, SERVING
from .helpers import ROOT, clean_env, merge, stage_data, write_stage

ALL_CASES = FOUNDATION + SERVING + BENCHMARK + RAW


def _bad_dir(tmp_path, change):
    folder = tmp_path / "config"
    folder.mkdir()
    if isinstance(change, str):
        write_stage(folder, change, name="dev")
    else:
        write_stage(folder, merge(stage_data("dev"), change), name="dev")
    return folder


def _run_app(context, outdir):
    return app.main(context=context, outdir=str(outdir))


@pytest.mark.parametrize("case_id, change, field, phrase", ALL_CASES, ids=[case[0] for case in ALL_CASES])
def test_synth_rejects_invalid_stage_with_the_validators_line(case_id, change, field, phrase, tmp_path, capsys):
    folder = _bad_dir(tmp_path, change)
    assert validate(["validate", str(folder / "dev.yaml")]) == 2
    validator_line = capsys.readouterr().err
    outdir = tmp_path / "cdk.out"
    assert _run_app({"config_dir": str(folder), "stage": "dev"}, outdir) == 2
    captured = capsys.readouterr()
    assert captured.err == validator_line  # same checks, same words, at validate and at synth time
    assert f": {field}: " in captured.err and phrase in captured.err
    assert not outdir.exists() or not any(outdir.iterdir())  # nothing written: no half-built assembly


def test_synth_of_unknown_stage_names_the_stages_there(tmp_path, capsys):
    assert _run_app({"stage": "qa"}, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("config/qa.yaml: (file): no stage named 'qa' (allowed: dev, prod)")


def test_python_app_exits_2_on_bad_stage_without_traceback(tmp_path):
    """`python app.py` as a user runs it (and `cdk synth`, cdk.json's app command): without scripts/env.sh's
    jsii settings, stderr is the validator's one line, no jsii Node.js banner before it."""
    folder = _bad_dir(tmp_path, {"gpu_nodegroup": {"instance_type": "g6.xlarge"}})
    env = clean_env(CDK_CONTEXT_JSON=json.dumps({"config_dir": str(folder)}), CDK_OUTDIR=str(tmp_path / "out"))
    env = {k: v for k, v in env.items() if not k.startswith("JSII_")}
    run = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith(f"{folder / 'dev.yaml'}: gpu_nodegroup.efa: g6.xlarge has no EFA interface")


def test_cdk_cli_synth_of_one_stage_needs_no_credentials(tmp_path):
    """The pinned CDK CLI, `cdk synth -c stage=prod`, with every AWS variable unset: only prod's stacks."""
    outdir = tmp_path / "cdk.out"
    run = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--quiet", "-c", "stage=prod", "-o", str(outdir)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    manifest = json.loads((outdir / "manifest.json").read_text())
    nested = sorted(name for name, art in manifest["artifacts"].items() if art["type"] == "cdk:cloud-assembly")
    assert nested == ["assembly-prod"]
    assert sorted(p.name for p in (outdir / "k8s").iterdir()) == ["prod"]


def test_cdk_cli_synth_fails_on_bad_stage(tmp_path):
    folder = _bad_dir(
        tmp_path, {"availability_zones": ["us-west-2a", "us-west-2b"], "gpu_availability_zone": "us-west-2c"}
    )
    run = subprocess.run(
        ["npx", "--no-install", "cdk", "synth", "--quiet", "-c", f"config_dir={folder}", "-o", str(tmp_path / "out")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
        check=False,
    )
    assert run.returncode != 0
    assert f"{folder / 'dev.yaml'}: gpu_availability_zone: 'us-west-2c' is not one of the stage's" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_secret_shaped_value_in_the_output_fails_synth_without_showing_it(tmp_path, capsys, monkeypatch):
    # The stage files refuse secret values; this plants one where code could put it (the rendered YAML)
    # and checks that synth itself runs the secret scan and fails with one line that hides the value.
    from charts import render

    planted = "AKIA" + "Z7Q3XK2M5N8P4R6T"
    real_write = render.write

    def write_with_a_leak(outdir, renderings):
        real_write(outdir, renderings)
        (tmp_path / "out" / "k8s" / "leak.yaml").write_text(f"key: {planted}\n")

    monkeypatch.setattr(render, "write", write_with_a_leak)
    folder = _bad_dir(tmp_path, {})  # the real dev stage file, unchanged
    assert (
        app.main(context={"config_dir": str(folder), "stage": "dev", "nag": "false"}, outdir=str(tmp_path / "out")) == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "k8s/leak.yaml:1: AWS access key id in the output" in err[0]
    assert planted not in err[0]


def _blocked_run(module: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """app.py synthesizing dev into tmp_path with `module` (and its submodules) unimportable."""
    probe = (
        "import runpy, sys\n"
        "class Blocked:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r} or name.startswith({module + '.'!r}):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Blocked())\n"
        "runpy.run_path('app.py', run_name='__main__')\n"
    )
    env = clean_env(CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON='{"stage": "dev", "nag": true}')
    return subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_a_venv_without_a_package_is_one_line_naming_the_set_up(tmp_path):
    """A venv older than the requirement files (here: cdk8s blocked from import) stops app.py with one line."""
    run = _blocked_run("cdk8s", tmp_path)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == "app.py: this venv lacks the module 'cdk8s': run scripts/setup.sh, then again\n"


def test_a_package_imported_only_during_the_synth_is_one_line_too(tmp_path):
    # cdk_nag loads when the compliance checks are added (stacks/compliance.py), after app.py's own imports
    run = _blocked_run("cdk_nag", tmp_path)
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr == "app.py: this venv lacks the module 'cdk_nag': run scripts/setup.sh, then again\n"


def test_a_missing_module_of_the_project_itself_is_shown_whole(tmp_path):
    # not a venv to set up again: a bug, whose traceback names the import that failed
    run = _blocked_run("stacks.compliance", tmp_path)
    assert run.returncode == 1 and "Traceback" in run.stderr
    assert "compliance" in run.stderr.splitlines()[-1] and "this venv lacks" not in run.stderr


def _paused_run(tmp_path: Path, pause: str) -> subprocess.Popen:
    """app.py synthesizing dev into tmp_path, which prints "paused" and sleeps at `pause`: at the import of
    stacks.assembly ("loading") or in an atexit hook that runs after jsii's ("exiting")."""
    probe = (
        "import atexit, runpy, sys, time\n"
        "def pause():\n"
        "    print('paused', flush=True)\n"
        "    time.sleep(60)\n"
        "class Loading:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'stacks.assembly':\n"
        "            pause()\n"
        f"if {pause!r} == 'loading':\n"
        "    sys.meta_path.insert(0, Loading())\n"
        "else:\n"
        "    atexit.register(pause)  # registered first, so run last: after jsii's own hook\n"
        "runpy.run_path('app.py', run_name='__main__')\n"
    )
    env = clean_env(CDK_OUTDIR=str(tmp_path), CDK_CONTEXT_JSON='{"stage": "dev"}')
    run = subprocess.Popen(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert run.stdout is not None and run.stdout.readline() == "paused\n"
    return run


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_while_app_py_loads_is_one_line_and_128_plus_n(tmp_path, signum):
    run = _paused_run(tmp_path, "loading")
    run.send_signal(signum)
    _, err = run.communicate(timeout=120)
    assert (run.returncode, err) == (128 + signum, f"app.py: stopped by signal {signum}, before the synth\n")


def test_a_signal_as_app_py_exits_is_one_line_and_128_plus_n(tmp_path):
    # Python's exit runs jsii's atexit hook, which swallowed the KeyboardInterrupt: a traceback, then exit 0
    run = _paused_run(tmp_path, "exiting")
    run.send_signal(signal.SIGHUP)
    _, err = run.communicate(timeout=120)
    assert (run.returncode, err) == (129, "app.py: stopped by signal 1 as it exited\n")
    assert (tmp_path / "manifest.json").is_file()  # the synth had ended: its output stays whole


def test_an_interrupted_synth_leaves_its_output_folder_empty(tmp_path):
    """Whatever the synth had written when the signal came (here: an assembly and a k8s folder), nothing of it
    stays to mix with an earlier synth's stages; exit 128+N, one line."""
    out = tmp_path / "cdk.out"
    probe = (
        "import pathlib, app\n"
        "def partial(*_):\n"
        f"    (pathlib.Path({str(out)!r}) / 'assembly-dev').mkdir(parents=True)\n"
        f"    (pathlib.Path({str(out)!r}) / 'k8s' / 'dev').mkdir(parents=True)\n"
        f"    (pathlib.Path({str(out)!r}) / 'manifest.json').write_text('{{}}')\n"
        "    app.INTERRUPTED.append(15)\n"
        "    raise KeyboardInterrupt\n"
        "app._synth = partial\n"
        f"app.main(context={{'stage': 'dev'}}, outdir={str(out)!r})\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 143, run.stderr
    assert run.stderr.splitlines()[-1] == f"app.py: stopped by signal 15: {out} emptied, no half-written synth left"
    assert list(out.iterdir()) == []
