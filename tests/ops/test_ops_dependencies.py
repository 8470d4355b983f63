"""`python -m ops` must start in the ops-only venv (requirements-ops.txt: boto3, pydantic, PyYAML), the one
the in-VPC verify runner and the pipeline's verify steps install: the benchmark's heavier packages are
imported only when `bench` runs. Neither the runner nor a GPU host (`rehearse`) has the CDK: `verify` and
`rehearse` import none of cdk8s, cdk8s-plus, aws-cdk-lib or jsii."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..helpers import ROOT

BENCH_ONLY = ("aiohttp", "matplotlib", "tokenizers", "transformers", "numpy")
CDK = ("cdk8s", "cdk8s_plus_28", "aws_cdk", "jsii")


def test_ops_cli_loads_without_the_benchmark_packages():
    probe = (
        "import sys, runpy; sys.argv = ['ops', 'verify', '--help']\n"
        "try:\n    runpy.run_module('ops', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {BENCH_ONLY!r} if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage: python -m ops verify" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("command", ["verify", "rehearse"])
def test_verify_and_rehearse_load_without_the_cdk(command):
    probe = (
        f"import sys, runpy; sys.argv = ['ops', {command!r}, '--help']\n"
        "try:\n    runpy.run_module('ops', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {CDK!r}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert f"usage: python -m ops {command}" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"
