#!/usr/bin/env python3
"""Synth benchmark: median wall time of `python app.py` (every stage in config/) against the floor, an
empty CDK app in the same venv with the same App settings, run interleaved side by side.

    .venv/bin/python scripts/bench_synth.py [--runs 7]

Prints the medians and the ratio (target: all stages in at most 3x the floor), and the same synth with
cdk-nag on (what `cdk synth` does, through cdk.json) for comparison. No AWS access is needed or used.
Each run writes to its own temporary cdk.out.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_FLAGS = "--max-semi-space-size=64"  # as app.py sets them
EMPTY_APP = """
import aws_cdk as cdk
app = cdk.App(builtin_cloud_formation_validation=False)
cdk.Stack(app, "Empty")
app.synth()
"""


def _env(outdir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(CDK_OUTDIR=outdir, AWS_EC2_METADATA_DISABLED="true", CDK_DISABLE_CLI_TELEMETRY="true",
               JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
               NODE_OPTIONS=NODE_FLAGS)  # the app sets these node flags itself; the floor gets the same
    return env


def _time(command: list[str], context: str | None = None) -> float:
    outdir = tempfile.mkdtemp(prefix="bench-cdk-out-")
    env = _env(outdir)
    if context:
        env["CDK_CONTEXT_JSON"] = context
    try:
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix="_empty_app.py", delete=False) as handle:
        handle.write(EMPTY_APP)
    app_cmd = [sys.executable, "app.py"]
    empty_cmd = [sys.executable, handle.name]
    _time(app_cmd), _time(empty_cmd)  # warm the file cache; not counted
    app_times, empty_times, nag_times = [], [], []
    for _ in range(args.runs):
        app_times.append(_time(app_cmd))
        empty_times.append(_time(empty_cmd))
        nag_times.append(_time(app_cmd, context='{"nag": true}'))
    os.unlink(handle.name)
    app_median, empty_median = statistics.median(app_times), statistics.median(empty_times)
    stages = len(list((ROOT / "config").glob("*.yaml")))
    print(f"runs: {args.runs} each, interleaved")
    print(f"all {stages} stages (python app.py): median {app_median:.2f} s  "
          f"(min {min(app_times):.2f}, max {max(app_times):.2f})")
    print(f"empty CDK app (floor):     median {empty_median:.2f} s  "
          f"(min {min(empty_times):.2f}, max {max(empty_times):.2f})")
    nag_median = statistics.median(nag_times)
    print(f"all stages + cdk-nag (as `cdk synth` runs it): median {nag_median:.2f} s  "
          f"(min {min(nag_times):.2f}, max {max(nag_times):.2f})")
    print(f"ratio: {app_median / empty_median:.2f}x the floor (target <= 3x); "
          f"with cdk-nag {nag_median / empty_median:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
