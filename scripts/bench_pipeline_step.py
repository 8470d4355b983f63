#!/usr/bin/env python3
"""The pipeline's Synth step as CodeBuild runs it (tests/stacks/codebuild_local.py), in a fresh clone of HEAD:
its time per phase and the peak memory of its process tree, the figures its compute size rests on.
    .venv/bin/python scripts/bench_pipeline_step.py [--runs N]
Uses this machine's pip, npm and Go caches (as CodeBuild's local cache restores them) and its own runtimes; the
project's venv (scripts/setup.sh) provides its packages."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from clients.cli_options import number

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # as app.py: Node 20's banner


def codebuild_local():
    """The tests' CodeBuild runner (tests/ is no package of the project: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("codebuild_local", ROOT / "tests" / "stacks" / "codebuild_local.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their fields through the module's entry
    spec.loader.exec_module(module)
    return module


def synth_spec(runner) -> dict:
    from config import load_stages
    from config.pipeline import load_pipeline
    from stacks import assembly

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "config"
        shutil.copytree(ROOT / "config", folder)
        shutil.copy(ROOT / "docs" / "pipeline.example.yaml", folder / "_pipeline.yaml")
        stages = load_stages(folder)
        app = assembly.new_app(outdir=str(Path(scratch) / "out"))
        assembly.build(app, stages, nag=False, pipeline=load_pipeline(folder, [s.stage for s in stages]))
        template = json.loads((Path(app.synth().directory) / "Pipeline.template.json").read_text())
    (spec,) = [s for s in runner.buildspecs(template).values() if "scripts/pipeline_check.sh" in json.dumps(s)]
    return spec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=number(int, 1, 100), default=1)
    args = parser.parse_args()
    runner = codebuild_local()
    spec, seconds, peaks = synth_spec(runner), [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as scratch:
            clone = Path(scratch) / "source"
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
            build = runner.run_buildspec(spec, cwd=clone, env=runner.codebuild_environment(clone, Path.home()))
            if not build.ok:
                print(build.output[-4000:], file=sys.stderr)
                return 1
            seconds.append(sum(build.seconds.values()))
            peaks.append(build.peak_rss)
            phases = ", ".join(f"{name} {value:.0f} s" for name, value in build.seconds.items())
            print(f"run {run + 1}: {phases}; peak RSS {build.peak_rss / 2**30:.2f} GiB", flush=True)
    print(
        f"Synth step: median {statistics.median(seconds) / 60:.1f} min, peak RSS {max(peaks) / 2**30:.2f} GiB of {args.runs} run(s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
