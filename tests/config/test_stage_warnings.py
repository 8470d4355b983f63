"""A valid stage's warnings (config/rules STAGE_WARNINGS, stage_warnings): GPUs the replicas leave idle, an endpoint
open to the internet, a tags.stage of another stage. `config validate` prints them, one line each, and exits 0."""

from __future__ import annotations

from config import load_stage_file
from config.__main__ import main
from config.rules import stage_warnings
from config.rules.cluster import open_endpoint
from config.rules.serving import unused_stream_batching
from config.rules.serving_roles import idle_gpus
from config.rules.top_level import stage_tag

from ..helpers import config_with, merge, stage_data, write_stage

OPEN = {"endpoint": {"public_access_cidrs": ["0.0.0.0/0"], "allow_public_internet": True}}


def test_idle_gpus_names_what_the_replicas_leave_idle(tmp_path):
    cfg = config_with(tmp_path, gpu_nodegroup={"count": 4})
    assert idle_gpus(cfg) == (
        "gpu_nodegroup.count",
        (
            "2 of 4 GPUs stay idle (4 x g6.8xlarge; replicas at most: prefill 1 x TP 1 + decode 1 x TP 1): raise the "
            "replica counts or lower gpu_nodegroup.count"
        ),
    )


def test_replicas_that_take_every_gpu_leave_none_idle(dev):
    assert idle_gpus(dev) is None


def test_autoscaled_replicas_count_at_their_most(tmp_path):
    cfg = config_with(
        tmp_path,
        serving={"prefill": {"replicas": None, "min_replicas": 1, "max_replicas": 2}},
        gpu_nodegroup={"count": 3},
    )
    assert idle_gpus(cfg) is None


def test_a_replica_counts_every_parallel_factor(tmp_path):
    # Two 4-GPU nodes, one TP 2 replica of each role: half the GPUs idle.
    cfg = config_with(
        tmp_path,
        gpu_nodegroup={"instance_type": "g6.12xlarge", "root_volume_gib": 300},
        serving={"engine": {"tensor_parallel_size": 2}},
    )
    found = idle_gpus(cfg)
    assert found is not None and found[1].startswith("4 of 8 GPUs stay idle")


def test_a_colocated_stage_runs_prefill_plus_decode_replicas_of_its_engine(tmp_path):
    cfg = config_with(tmp_path, serving={"mode": "colocated"}, gpu_nodegroup={"count": 3})
    found = idle_gpus(cfg)
    assert found is not None and found[1].startswith("1 of 3 GPUs stay idle")


def test_an_endpoint_open_to_the_internet_is_warned_about(tmp_path):
    found = open_endpoint(config_with(tmp_path, cluster=OPEN))
    assert found is not None and found[0] == "cluster.endpoint.allow_public_internet"
    assert "open to more than a /8 of the internet (0.0.0.0/0)" in found[1]


def test_allow_public_internet_over_a_small_range_is_not(tmp_path):
    cfg = config_with(
        tmp_path, cluster={"endpoint": {"public_access_cidrs": ["52.94.76.0/22"], "allow_public_internet": True}}
    )
    assert open_endpoint(cfg) is None


def test_a_copied_stage_file_that_kept_the_other_stages_tag_is_warned_about(tmp_path):
    cfg = load_stage_file(write_stage(tmp_path, merge(stage_data("dev"), {"stage": "staging"})))
    assert stage_tag(cfg) == (
        "tags.stage",
        (
            "'dev' names another stage than this file's (staging): every resource of staging carries it, and cost "
            "reports count them under 'dev' (fix: stage: staging)"
        ),
    )


def test_a_stage_tag_of_the_stage_itself_is_not(dev):
    assert stage_tag(dev) is None


def test_stream_batching_where_vllms_own_server_streams_is_warned_about(tmp_path):
    cfg = config_with(tmp_path, serving={"mode": "colocated", "serve_ingress": "haproxy", "stream_batching_ms": 10})
    assert unused_stream_batching(cfg) == (
        "serving.stream_batching_ms",
        (
            "10 has no effect: colocated under serve_ingress haproxy, vLLM's own server sends each token as it comes "
            "(remove it, or use serve_ingress serve_proxy)"
        ),
    )


def test_stream_batching_where_a_batcher_runs_is_not(tmp_path):
    for serving in ({"serve_ingress": "haproxy"}, {"mode": "colocated", "serve_ingress": "serve_proxy"}):
        assert unused_stream_batching(config_with(tmp_path, serving={**serving, "stream_batching_ms": 10})) is None


def test_each_warning_carries_the_id_of_its_rule(tmp_path):
    cfg = config_with(tmp_path, cluster=OPEN, gpu_nodegroup={"count": 3})
    assert [warned.id for warned in stage_warnings(cfg)] == ["pd-inference:open-endpoint", "pd-inference:idle-gpus"]


def test_validate_prints_one_line_each_and_exits_0(tmp_path, capsys):
    data = merge(stage_data("dev"), {"stage": "staging", "cluster": OPEN, "gpu_nodegroup": {"count": 4}})
    path = write_stage(tmp_path, data)
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [line.split(": ")[:3] for line in err] == [
        [str(path), "tags.stage", "warning"],
        [str(path), "cluster.endpoint.allow_public_internet", "warning"],
        [str(path), "gpu_nodegroup.count", "warning"],
        [
            str(path),
            "cluster.admin_principal_arns",
            "warning",
        ],  # the example's placeholder (config/rules PLACEHOLDER_WARNINGS)
    ]
