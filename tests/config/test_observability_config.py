"""The observability section: on in both stages, the topic ARN checked, thresholds bounded."""

from __future__ import annotations

import pytest

from config.errors import ConfigError

from ..helpers import config_with


def test_on_in_both_stages(stages):
    assert stages["dev"].observability.enabled and stages["prod"].observability.enabled


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"alarm_topic_arn": "arn:aws:sns:eu-west-1:123456789012:alarms"}, "observability.alarm_topic_arn"),
        ({"alarm_topic_arn": "not-an-arn"}, "observability.alarm_topic_arn"),
        ({"ttft_p99_slo_seconds": 0}, "observability.ttft_p99_slo_seconds"),
        ({"error_rate_percent": 101}, "observability.error_rate_percent"),
        ({"gpu_memory_percent": "95"}, "observability.gpu_memory_percent"),
        ({"unknown": 1}, "observability.unknown"),
    ],
)
def test_bad_values_name_the_field(tmp_path, overrides, field):
    with pytest.raises(ConfigError) as caught:
        config_with(tmp_path, observability=overrides)
    assert caught.value.field == field and "\n" not in str(caught.value)


def test_a_topic_of_the_stage_region_is_accepted(tmp_path):
    cfg = config_with(tmp_path, observability={"alarm_topic_arn": "arn:aws:sns:us-west-2:123456789012:alarms"})
    assert cfg.observability.alarm_topic_arn.endswith(":alarms")
