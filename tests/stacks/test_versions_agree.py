"""Lists that must agree: the schema's log retentions and the CDK enum table; the schema's Kubernetes
versions and the kubectl layers (one source: config/versions.py KUBECTL_LAYERS)."""

from __future__ import annotations

import importlib.util
import typing

import pytest
from aws_cdk import aws_logs as logs

from config import schema, versions
from stacks import retention


def _field_choices(model, name):
    return set(typing.get_args(model.model_fields[name].annotation))


def test_schema_retentions_are_the_table_keys():
    assert _field_choices(schema.Cluster, "log_retention_days") == set(schema.LOG_RETENTION_DAYS)
    assert set(retention._BY_DAYS) == set(schema.LOG_RETENTION_DAYS)


@pytest.mark.parametrize("days", schema.LOG_RETENTION_DAYS)
def test_each_retention_maps_to_its_enum(days):
    member = retention.retention(days)
    assert isinstance(member, logs.RetentionDays)
    assert member is logs.RetentionDays[member.name]


def test_schema_versions_are_the_kubectl_layers():
    assert _field_choices(schema.Cluster, "kubernetes_version") == set(versions.KUBERNETES_VERSIONS)
    assert set(versions.KUBECTL_LAYERS) == set(versions.KUBERNETES_VERSIONS)
    assert schema.Cluster().kubernetes_version in versions.KUBERNETES_VERSIONS


@pytest.mark.parametrize("version", versions.KUBERNETES_VERSIONS)
def test_each_layer_is_installed_and_named_for_its_version(version):
    module, name = versions.KUBECTL_LAYERS[version]
    minor = version.split(".")[1]
    assert module.endswith(f"_v{minor}") and name == f"KubectlV{minor}Layer"
    assert importlib.util.find_spec(module) is not None, f"{module} is not installed (requirements.txt)"
