#!/usr/bin/env python3
"""Synth benchmark: median wall time of `python app.py` (every stage in config/) against the floor, an
empty CDK app in the same venv with the same App settings, run interleaved side by side.

    .venv/bin/python scripts/bench_synth.py [--runs 7]

Prints the medians and the ratio (target: all stages in at most 1.5x the floor, an empty app that loads
aws_eks_v2, cdk8s and cdk8s-plus-28), the same synth with cdk-nag on (what `cdk synth` does, through
cdk.json), and for comparison the empty app with app.py's process tuning (gc.freeze() after the imports). No
AWS access is needed or used.
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

from clients.cli_options import number

ROOT = Path(__file__).resolve().parent.parent

# The floor: an empty CDK app that loads what every synth of this app must load (the EKS module, cdk8s
# and cdk8s-plus-28), so the ratio measures the app's own work.
FLOOR_IMPORTS = "from aws_cdk import aws_eks_v2\nimport cdk8s\nimport cdk8s_plus_28\n"
EMPTY_APP = f"""
import aws_cdk as cdk
{FLOOR_IMPORTS}
app = cdk.App(builtin_cloud_formation_validation=False)
cdk.Stack(app, "Empty")
app.synth()
"""
# The same empty app with app.py's process tuning (the CDK modules frozen out of the cycle collector once
# loaded): shown beside the floor so the app's own cost can be read apart from the tuning.
EMPTY_APP_TUNED = f"""
import gc
import aws_cdk as cdk
{FLOOR_IMPORTS}
gc.freeze()
app = cdk.App(builtin_cloud_formation_validation=False)
cdk.Stack(app, "Empty")
app.synth()
"""


def _env(outdir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CDK_"))}
    env.update(
        CDK_OUTDIR=outdir,
        AWS_EC2_METADATA_DISABLED="true",
        CDK_DISABLE_CLI_TELEMETRY="true",
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
    )
    return env


def _time(command: list[str], context: str | None = None) -> float:
    outdir = tempfile.mkdtemp(prefix="bench-cdk-out-")
    env = _env(outdir)
    if context:
        env["CDK_CONTEXT_JSON"] = context
    try:
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=number(int, 1, 100), default=7)
    args = parser.parse_args()
    scripts = []
    for text in (EMPTY_APP, EMPTY_APP_TUNED):
        with tempfile.NamedTemporaryFile("w", suffix="_empty_app.py", delete=False) as handle:
            handle.write(text)
        scripts.append(handle.name)
    app_cmd = [sys.executable, "app.py"]
    empty_cmd, fast_cmd = ([sys.executable, script] for script in scripts)
    _time(app_cmd), _time(empty_cmd), _time(fast_cmd)  # warm the file cache
    app_times, empty_times, fast_times, nag_times = [], [], [], []
    for _ in range(args.runs):
        app_times.append(_time(app_cmd))
        empty_times.append(_time(empty_cmd))
        fast_times.append(_time(fast_cmd))
        nag_times.append(_time(app_cmd, context='{"nag": true}'))
    for script in scripts:
        os.unlink(script)
    app_median, empty_median = statistics.median(app_times), statistics.median(empty_times)
    fast_median = statistics.median(fast_times)
    stages = len(list((ROOT / "config").glob("*.yaml")))
    print(f"runs: {args.runs} each, interleaved")
    print(
        f"all {stages} stages (python app.py): median {app_median:.2f} s  "
        f"(min {min(app_times):.2f}, max {max(app_times):.2f})"
    )
    print(
        f"empty CDK app loading aws_eks_v2, cdk8s, cdk8s-plus-28 (floor): median {empty_median:.2f} s  "
        f"(min {min(empty_times):.2f}, max {max(empty_times):.2f})"
    )
    print(
        f"empty CDK app, tuned as app.py: median {fast_median:.2f} s  "
        f"(min {min(fast_times):.2f}, max {max(fast_times):.2f})"
    )
    nag_median = statistics.median(nag_times)
    print(
        f"all stages + cdk-nag (as `cdk synth` runs it): median {nag_median:.2f} s  "
        f"(min {min(nag_times):.2f}, max {max(nag_times):.2f})"
    )
    print(
        f"ratio: {app_median / empty_median:.2f}x the floor (target <= 1.5x); "
        f"with cdk-nag {nag_median / empty_median:.2f}x; "
        f"{app_median / fast_median:.2f}x the empty app tuned as app.py"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
