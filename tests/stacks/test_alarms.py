"""The stage's alarms (stacks/alarms.py); the rest of their checks sit with the observability tests."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("stage", ["dev", "prod"])
def test_the_ttft_alarm_takes_the_quantile_of_the_clusters_summed_native_histogram(app_synth, stages, stage):
    cfg = stages[stage]
    (alarm,) = [
        a["Properties"]
        for name, a in app_synth.resources(stage, "cluster", "AWS::CloudWatch::Alarm").items()
        if name.startswith("AlarmsTtftP99")
    ]
    assert alarm["EvaluationCriteria"]["PromQLCriteria"]["Query"] == (
        "histogram_quantile(0.99, sum(rate(ray_vllm_time_to_first_token_seconds"
        f'{{ClusterName="{cfg.cluster_name}"}}[5m]))) > {cfg.observability.ttft_p99_slo_seconds:g}'
    )
