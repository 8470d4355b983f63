"""The KubeRay operator is built at exactly the stage's version or not at all: the Go module proxy's
refusal is reported in one line, quoted, and no other version is built."""

from __future__ import annotations

import pytest

from localcluster import rehearsal, tools
from tests.helpers import config_with


def test_the_operator_module_is_the_stage_version(dev_cfg):
    assert tools.KUBERAY_OPERATOR.version() == f"v{dev_cfg.addons.kuberay_operator}"


def test_the_pinned_operator_builds_or_the_proxy_answer_is_quoted(binaries):
    try:
        record = tools.ensure(tools.KUBERAY_OPERATOR)
    except tools.ToolError as exc:
        message = str(exc)
        assert "\n" not in message
        assert message.startswith("the Go module proxy refused github.com/ray-project/kuberay/ray-operator@v1.7.0: ")
        assert "server response:" in message
    else:
        pytest.fail(
            f"the operator now builds ({record.binaries}): wire it into localcluster/checks.py "
            f"check_operator and run it against the cluster"
        )


def test_a_stage_on_another_operator_version_is_refused(tmp_path):
    cfg = config_with(tmp_path, addons={"kuberay_operator": "1.6.2"})
    assert rehearsal.versions_match(cfg) == (
        "the rehearsal builds the KubeRay operator v1.7.0 (tools/go/kuberay-operator/go.mod) and the stage "
        "installs 1.6.2 (addons.kuberay_operator)"
    )


def test_a_stage_on_another_kubernetes_minor_is_refused(tmp_path):
    cfg = config_with(tmp_path, cluster={"kubernetes_version": "1.34"})
    assert rehearsal.versions_match(cfg) == (
        "the rehearsal builds Kubernetes v1.35.4 (tools/go/kubernetes/go.mod) and the stage runs 1.34 "
        "(cluster.kubernetes_version)"
    )


def test_the_proxy_refusal_is_read_from_the_go_command_output():
    output = (
        "go: github.com/x/y@v1.0.0: reading https://proxy.example/github.com/x/y/@v/v1.0.0.zip: "
        "403 Forbidden\n\tserver response: This module version is not available.\n"
    )
    assert tools.refusal(output) == (
        "go: github.com/x/y@v1.0.0: reading https://proxy.example/github.com/x/y/@v/"
        "v1.0.0.zip: 403 Forbidden server response: This module version is not available."
    )
    assert tools.refusal("go: build failed: undefined: x") is None
