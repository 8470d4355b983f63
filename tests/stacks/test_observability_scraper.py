"""The Ray scraper can reach CloudWatch, Application Signals instruments nothing, and the NIXL metric filters
read only the workers' log relay (docs/OBSERVABILITY.md, "The scraper's region, mode and credentials" and
"The NIXL patterns and how they are tested").

The JSON filter patterns are checked with an evaluator of exactly the form `relay_filter_pattern` writes
(`{ (<field> <op> "<value>") && ... }`, `=`/`!=`, `*` as the wildcard in the value); it refuses anything
else, so a pattern outside that form cannot be tested as if it were inside."""

from __future__ import annotations

import json
import re

import pytest

from charts.log_relay import CONTAINER as RELAY_CONTAINER
from clients import nixl
from config.topology import CLOUDWATCH_OBSERVABILITY_ADDON, RAY_SCRAPER_NAME
from stacks import observability
from stacks.alarms import relay_filter_pattern
from stacks.log_patterns import NIXL_NOT_ON_EFA

from ..helpers import ROOT

STAGES = ("dev", "prod")
FIXTURES = ROOT / "tests" / "ops" / "fixtures"
REAL_LINES = ROOT / "evidence" / "2026-11-30-h200-pd" / "nixl-lines-pd.txt"

EXPECTED_PATTERNS = {
    (
        '{ ($.kubernetes.container_name = "ray-log-relay") && ($.log = "*rails using provider=*") '
        '&& ($.log != "*provider=efa*") }'
    ),
    '{ ($.kubernetes.container_name = "ray-log-relay") && ($.log = "*Backend UCX was instantiated*") }',
}


def _config(app_synth, stage):
    addon = app_synth.one(stage, "cluster", "AWS::EKS::Addon", AddonName=CLOUDWATCH_OBSERVABILITY_ADDON)
    return json.loads(addon["Properties"]["ConfigurationValues"])


def _scraper(config):
    (scraper,) = [a for a in config["agents"] if a["name"] == RAY_SCRAPER_NAME]
    return scraper


# --- the scraper's region and mode -------------------------------------------------------------------


@pytest.mark.parametrize("stage", STAGES)
def test_the_scrapers_agent_config_names_the_stages_region(app_synth, stages, stage):
    scraper = _scraper(_config(app_synth, stage))
    assert scraper["config"]["agent"] == {"region": stages[stage].region}
    # the same region as the OTLP half of the same agent
    assert scraper["otelConfig"]["extensions"]["sigv4auth/pd_ray_metrics"]["region"] == stages[stage].region


@pytest.mark.parametrize("stage", STAGES)
def test_the_scraper_runs_in_with_irsa_mode(app_synth, stage):
    # exactly this env, exactly "True" (the agent compares the string): the default credential chain, which
    # reaches EKS Pod Identity, instead of onPrem's credentials file
    assert _scraper(_config(app_synth, stage))["env"] == [{"name": "RUN_WITH_IRSA", "value": "True"}]


@pytest.mark.parametrize("stage", STAGES)
def test_the_node_agent_is_the_charts_own(app_synth, stage):
    # no region, env or config of ours on the default agent: the chart builds its config (with its region)
    config = _config(app_synth, stage)
    assert config["agents"][0] == {"name": "cloudwatch-agent"}
    assert [a["name"] for a in config["agents"]] == ["cloudwatch-agent", RAY_SCRAPER_NAME]


def test_the_region_is_the_argument_not_a_constant():
    config = observability.addon_configuration("pd-inference-x", "inference", "eu-central-1")
    scraper = _scraper(config)
    assert scraper["config"]["agent"] == {"region": "eu-central-1"}
    assert (
        scraper["otelConfig"]["exporters"]["otlphttp/pd_ray_metrics"]["endpoint"]
        == "https://monitoring.eu-central-1.amazonaws.com:443"
    )


# --- Application Signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("stage", STAGES)
def test_application_signals_auto_monitoring_is_off(app_synth, stage):
    config = _config(app_synth, stage)
    assert config["manager"] == {"applicationSignals": {"autoMonitor": {"monitorAllServices": False}}}
    assert config["manager"]["applicationSignals"]["autoMonitor"]["monitorAllServices"] is False


# --- the NIXL metric filters: the relay's lines only ---------------------------------------------------

_CONDITION = re.compile(r'\((\$(?:\.[A-Za-z_][A-Za-z0-9_]*)+) (=|!=) "((?:[^"\\]|\\.)*)"\)')


def parse_json_pattern(pattern: str) -> list[tuple[list[str], str, str]]:
    """(path, operator, value) per condition of `{ (c1) && (c2) ... }`; ValueError for anything else."""
    text = pattern.strip()
    if not (text.startswith("{ ") and text.endswith(" }")):
        raise ValueError(f"not a JSON pattern of the supported form: {pattern!r}")
    conditions = []
    for part in text[2:-2].split(" && "):
        match = _CONDITION.fullmatch(part)
        if not match:
            raise ValueError(f"outside the supported form at {part!r} (pattern {pattern!r})")
        value = re.sub(r"\\(.)", r"\1", match.group(3))
        conditions.append((match.group(1).split(".")[1:], match.group(2), value))
    return conditions


def _glob(value: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(piece) for piece in value.split("*")), re.DOTALL)


def json_matches(pattern: str, event: str) -> bool:
    """CloudWatch's reading of the supported form: the event must be JSON; `=` holds when the field is a
    string that the value (with `*` for any text) matches whole, `!=` when it is a string that it does not."""
    try:
        document = json.loads(event)
    except ValueError:
        return False
    for path, operator, value in parse_json_pattern(pattern):
        field = document
        for key in path:
            field = field.get(key) if isinstance(field, dict) else None
        if not isinstance(field, str):
            return False
        if (_glob(value).fullmatch(field) is not None) != (operator == "="):
            return False
    return True


def fluent_bit_event(line: str, container: str) -> str:
    """A Container Insights application log event: the add-on's Fluent Bit record, the container's line in
    `log` (trailing newline kept, as the tail input reads it) and the kubernetes filter's metadata."""
    return json.dumps(
        {
            "log": line + "\n",
            "stream": "stdout",
            "time": "2026-11-30T10:00:00.000000000Z",
            "kubernetes": {
                "pod_name": "ray-llm-x7k2p-gpu-workers-abcde",
                "namespace_name": "inference",
                "container_name": container,
                "docker_id": "0f3c",
                "container_image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/ray",
            },
        }
    )


def _fires(lines: list[str], container: str) -> bool:
    patterns = [relay_filter_pattern(p).log_pattern_string for p in NIXL_NOT_ON_EFA.values()]
    return any(json_matches(p, fluent_bit_event(line, container)) for p in patterns for line in lines)


@pytest.mark.parametrize("stage", STAGES)
def test_the_template_has_the_relay_scoped_patterns(app_synth, stage):
    filters = app_synth.resources(stage, "cluster", "AWS::Logs::MetricFilter")
    assert {f["Properties"]["FilterPattern"] for f in filters.values()} == EXPECTED_PATTERNS
    assert len(filters) == 2
    for f in filters.values():
        assert f'$.kubernetes.container_name = "{RELAY_CONTAINER}"' in f["Properties"]["FilterPattern"]


def test_the_patterns_are_inside_the_evaluators_form():
    for pattern in EXPECTED_PATTERNS:
        parse_json_pattern(pattern)


@pytest.mark.parametrize(
    "outside", ['"a b"', "{ $.x = 1 }", '{ ($.x = "a") || ($.y = "b") }', "{ ($.x = %a%) }", '{ ($.x > "a") }']
)
def test_the_evaluator_refuses_other_syntax(outside):
    with pytest.raises(ValueError):
        parse_json_pattern(outside)


def test_the_evaluator_reads_wildcards_and_exclusion():
    (pattern,) = [p for p in EXPECTED_PATTERNS if "provider=efa" in p]
    assert json_matches(pattern, fluent_bit_event("x Created 2 rails using provider=tcp", RELAY_CONTAINER))
    assert not json_matches(pattern, fluent_bit_event("x Created 2 rails using provider=efa", RELAY_CONTAINER))
    assert not json_matches(pattern, "Created 2 rails using provider=tcp")  # not JSON: no match


@pytest.mark.parametrize(
    "fixture, fires",
    [
        ("efa.log", False),
        ("tcp.log", True),
        ("ucx.log", True),
        ("missing-plugin.log", False),
        ("no-provider-line.log", False),
    ],
)
def test_relay_lines_fire_as_verify_judges_them(fixture, fires):
    lines = (FIXTURES / fixture).read_text().splitlines()
    assert _fires(lines, RELAY_CONTAINER) is fires
    if fixture in ("efa.log", "tcp.log", "ucx.log"):
        assert nixl.classify("\n".join(lines)).ok is (not fires)


@pytest.mark.parametrize("fixture", ["tcp.log", "ucx.log"])
@pytest.mark.parametrize("container", ["ray-worker", "ray-head", "cloudwatch-agent", "pytest"])
def test_the_same_lines_from_another_container_do_not_count(fixture, container):
    assert not _fires((FIXTURES / fixture).read_text().splitlines(), container)


def test_the_rehearsals_real_lines_fire_only_on_ucx_from_the_relay():
    lines = REAL_LINES.read_text().splitlines()
    hits = [line for line in lines if _fires([line], RELAY_CONTAINER)]
    assert len(hits) == 4 and all("Backend UCX was instantiated" in line for line in hits)
    assert not _fires(lines, "ray-worker")
