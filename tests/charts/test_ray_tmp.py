"""/tmp/ray's bound (charts/ray_tmp.py): every log file at its rotated maximum, and the spill allowance."""

from __future__ import annotations

from charts import ray_tmp


def test_the_bound_holds_every_log_file_at_its_rotated_maximum_and_the_allowance():
    # 128 files x 16 MiB x (1 + 2 backups) = 6 GiB of logs, and 2 GiB for spilled objects and the session.
    assert ray_tmp.size_limit_gib() == 8


def test_the_rotation_variables_are_the_ones_ray_reads():
    assert ray_tmp.rotation_environment() == [
        {"name": "RAY_ROTATION_MAX_BYTES", "value": str(16 * 2**20)},
        {"name": "RAY_ROTATION_BACKUP_COUNT", "value": "2"},
    ]
