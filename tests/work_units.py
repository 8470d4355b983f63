"""How the suite is shared among pytest-xdist's workers (scripts/test.sh: `--dist loadfile`).

A work unit runs whole on one worker, so a module fixture is built once: a test file, except that the tests
of the real control plane (tests/cluster/) are one unit, as they share its session fixtures, and so are the tests
that start a real Ray (RAY): two Rays on one machine see each other's processes, and `ray stop --force` ends every
Ray of the machine (the pipeline's fresh-clone check runs tests/charts, so its file is one of them). xdist's own
`xdist_group` marks cannot do this under pytest 9.2: xdist 3.8 renames the item's `_nodeid`
(xdist/remote.py), which pytest 9.2's `Node.nodeid` no longer reads (_pytest/nodes.py), so the scheduler
never sees the group. The longest units start first, so that the workers finish together."""

from __future__ import annotations

from collections.abc import Iterable

from xdist.scheduler import LoadFileScheduling

CLUSTER = "tests/cluster"
RAY = "tests/serving_lab/rehearse/test_real_ray.py"
PIPELINE = "tests/stacks/test_pipeline.py"  # its fresh-clone check runs tests/charts/test_tp_placement_on_ray.py
STARTS_RAY = (RAY, "tests/charts/test_tp_placement_on_ray.py", PIPELINE)
# The units over 20 s, longest first, from one run's per-file wall times (2026-12-04); a unit missing here only
# starts later. One exception: tests/test_lint.py's mypy (1-1.5 CPU-minutes on a new machine) must fill the
# machine's mypy cache before the fresh-clone pipeline check runs mypy too, so two units stand between them:
# three workers start the first three, and the pipeline's unit goes at the second one to end, after lint's.
START_ORDER = (
    CLUSTER,
    "tests/test_lint.py",
    "tests/serving_lab/bench/test_cli.py",
    "tests/ops/test_diff.py",
    RAY,  # the pipeline's fresh-clone check among them
    "tests/ops/test_diff_cli.py",
    "tests/ops/test_non_aws_answers.py",
    "tests/ops/test_diff_synth_cache.py",
    "tests/ops/test_diff_trust.py",
    "tests/test_setup_venv.py",
    "tests/ops/test_preflight.py",
    "tests/test_checkov.py",
    "tests/test_app.py",
)


def work_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path in STARTS_RAY:
        return RAY
    return CLUSTER if path.startswith(CLUSTER + "/") else path


def next_unit(waiting: Iterable[str]) -> str:
    """The waiting unit to start next: the first of START_ORDER still waiting, else xdist's order (most tests
    first)."""
    rank = {unit: place for place, unit in enumerate(START_ORDER)}
    return min(waiting, key=lambda unit: rank.get(unit, len(rank)))


class ByWorkUnit(LoadFileScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)

    def _assign_work_unit(self, node) -> None:
        self.workqueue.move_to_end(next_unit(self.workqueue), last=False)
        super()._assign_work_unit(node)
