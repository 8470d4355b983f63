"""tests/work_units.py: how the suite is shared among pytest-xdist's workers."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

import pytest

from .helpers import ROOT
from .work_units import START_ORDER, STARTS_RAY, next_unit, work_unit


@pytest.mark.parametrize(
    ("nodeid", "unit"),
    [
        ("tests/ops/test_diff.py::test_a[dev]", "tests/ops/test_diff.py"),
        ("tests/cluster/test_teardown.py::test_b", "tests/cluster"),
        ("tests/cluster/test_admission.py::test_c", "tests/cluster"),
        ("tests/clusterless/test_d.py::test_e", "tests/clusterless/test_d.py"),
        ("tests/charts/test_tp_placement_on_ray.py::test_f", "tests/serving_lab/rehearse/test_real_ray.py"),
        ("tests/stacks/test_pipeline.py::test_g", "tests/serving_lab/rehearse/test_real_ray.py"),
    ],
)
def test_a_unit_is_the_file_the_control_planes_folder_or_the_files_that_start_ray(nodeid, unit):
    assert work_unit(nodeid) == unit


def test_the_listed_units_start_first_in_their_order_then_xdists():
    waiting = ["tests/a.py", START_ORDER[2], "tests/b.py", START_ORDER[1]]
    assert next_unit(waiting) == START_ORDER[1]
    assert next_unit(["tests/a.py", "tests/b.py"]) == "tests/a.py"


def test_lint_ends_before_the_fresh_clone_pipeline_check_starts_so_its_mypy_is_warm():
    # Three workers (scripts/test.sh on 2 cores) take the first three units at once; the fifth goes when two
    # have ended, and only the control plane's unit outlasts lint's.
    assert START_ORDER.index("tests/test_lint.py") < 3
    assert START_ORDER.index(work_unit("tests/stacks/test_pipeline.py::test_a")) >= 4


@pytest.mark.parametrize("unit", START_ORDER + STARTS_RAY)
def test_every_listed_unit_is_in_the_suite(unit):
    assert (ROOT / unit).exists()


def test_under_two_workers_the_control_planes_files_run_on_one():
    # Two light files of tests/cluster (no control plane): plain loadfile gives each worker one of them.
    cluster = ["tests/cluster/test_unrunnable_binaries.py", "tests/cluster/test_tools.py"]
    light = f"{cluster[1]}::test_a_binary_that_cannot_be_run_is_one_line_naming_its_folder"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadfile", "-v", cluster[0], light],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    workers = defaultdict(set)
    for worker, path in re.findall(r"^\[(gw\d+)\] .*?PASSED (\S+?)::", run.stdout, re.MULTILINE):
        workers[path].add(worker)
    assert set(workers) == set(cluster) and workers[cluster[0]] == workers[cluster[1]], dict(workers)
    assert len(workers[cluster[0]]) == 1
