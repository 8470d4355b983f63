"""preflight's vCPU quota check counts what a managed-nodegroup update may launch above max_size
(ops/preflight.py, UPDATE_SURGE): nothing for the GPU nodegroup (UpdateStrategy MINIMAL), up to
max(2 x its AZs, maxUnavailable) for the system nodegroup (EKS's DEFAULT). The rules must match what
stacks/nodegroups.py configures: checked on its source, without synthesizing anything."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ops import preflight
from ops.preflight import UPDATE_SURGE, UpdateRule, update_surge, vcpu_needs

from ..helpers import stage_data
from .test_preflight import Fake, _cfg

NODEGROUPS = Path(__file__).resolve().parents[2] / "stacks" / "nodegroups.py"
STANDARD, G = "L-1216C47A", "L-DB2E81BA"
STANDARD_NAME = "On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"


def _stage(tmp_path, stage):
    from config import load_stage_file

    from ..helpers import write_stage

    return load_stage_file(write_stage(tmp_path, stage_data(stage)))


# --- the rule -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule, zones, surge",
    [
        (UpdateRule("MINIMAL", 1), 1, 0),
        (UpdateRule("MINIMAL", 1), 3, 0),
        (UpdateRule("MINIMAL", 10), 3, 0),
        (UpdateRule("DEFAULT"), 3, 6),
        (UpdateRule("DEFAULT"), 2, 4),
        (UpdateRule("DEFAULT"), 1, 2),
        (UpdateRule("DEFAULT", 10), 3, 10),
        (UpdateRule("DEFAULT", 6), 3, 6),
    ],
)
def test_update_surge_is_zero_for_minimal_and_max_of_twice_the_azs_and_max_unavailable_for_default(rule, zones, surge):
    assert update_surge(rule, zones) == surge


def _module() -> ast.Module:
    return ast.parse(NODEGROUPS.read_text())


def _constant(module: ast.Module, name: str):
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{name} is not assigned in {NODEGROUPS}")


def _function(module: ast.Module, name: str) -> ast.FunctionDef:
    found = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, f"{name} is not defined in {NODEGROUPS}"
    return found[0]


def test_gpu_rule_matches_the_update_config_stacks_nodegroups_sets():
    module = _module()
    assert _constant(module, "GPU_UPDATE_STRATEGY") == "MINIMAL" == UPDATE_SURGE["gpu-worker"].strategy
    assert _constant(module, "GPU_MAX_UNAVAILABLE") == UPDATE_SURGE["gpu-worker"].max_unavailable
    gpu = ast.unparse(_function(module, "add_gpu_nodegroup"))
    assert 'add_property_override("UpdateConfig.UpdateStrategy", GPU_UPDATE_STRATEGY)' in gpu.replace("'", '"')
    assert "max_unavailable=GPU_MAX_UNAVAILABLE" in gpu


def test_system_rule_is_eks_default_because_stacks_nodegroups_sets_no_update_config():
    system = ast.unparse(_function(_module(), "add_system_nodegroup"))
    for setting in ("max_unavailable", "UpdateConfig", "UpdateStrategy", "MINIMAL"):
        assert setting not in system
    assert UPDATE_SURGE["system"] == UpdateRule("DEFAULT")
    assert set(UPDATE_SURGE) == {"system", "gpu-worker"}


# --- the numbers for dev and prod --------------------------------------------------------------------


def test_dev_needs_32_standard_vcpus_with_the_surge_and_64_gpu_vcpus_without(tmp_path):
    assert vcpu_needs(_stage(tmp_path, "dev")) == {
        (STANDARD, False): (32, "2 system nodes (max) + 6 a DEFAULT update may add, x 4 vCPUs"),
        (G, False): (64, "2 gpu-worker nodes (max) + 0 (a MINIMAL update adds none), x 32 vCPUs"),
    }


def test_prod_needs_80_standard_vcpus_with_the_surge_and_128_gpu_vcpus_without(tmp_path):
    assert vcpu_needs(_stage(tmp_path, "prod")) == {
        (STANDARD, False): (80, "4 system nodes (max) + 6 a DEFAULT update may add, x 8 vCPUs"),
        (G, False): (128, "4 gpu-worker nodes (max) + 0 (a MINIMAL update adds none), x 32 vCPUs"),
    }


def test_two_stage_azs_give_the_system_nodegroup_a_surge_of_4(tmp_path):
    cfg = _cfg(tmp_path, availability_zones=["us-west-2a", "us-west-2b"])
    assert vcpu_needs(cfg)[(STANDARD, False)] == (24, "2 system nodes (max) + 4 a DEFAULT update may add, x 4 vCPUs")


# --- the check against the account -------------------------------------------------------------------


def test_standard_quota_exceeded_only_by_the_surge_fails_and_says_so(aws, tmp_path):
    # 2 system nodes x 4 vCPUs = 8 fits in 31; with the 6 a DEFAULT update may add, 32 does not.
    report, _ = Fake().ready(standard_quota=31).run(_cfg(tmp_path))
    check = report.find(f"vCPU quota {STANDARD}")
    assert check.status == "fail"
    assert check.detail == (
        f"{STANDARD_NAME}: quota 31, in use 0, free 31, this stage needs up to 32: "
        "2 system nodes (max) + 6 a DEFAULT update may add, x 4 vCPUs"
    )
    assert check.fix.startswith(f"request an increase of {STANDARD} to at least 32 vCPUs")
    assert report.exit_code == 1


def test_standard_quota_that_holds_the_surge_passes(aws, tmp_path):
    report, _ = Fake().ready(standard_quota=32).run(_cfg(tmp_path))
    check = report.find(f"vCPU quota {STANDARD}")
    assert check.status == "pass"
    assert check.detail == (
        f"{STANDARD_NAME}: quota 32, in use 0, free 32, this stage needs up to 32: "
        "2 system nodes (max) + 6 a DEFAULT update may add, x 4 vCPUs"
    )


def test_gpu_family_has_no_surge_a_quota_of_exactly_max_size_passes(aws, tmp_path):
    report, _ = Fake().ready(g_quota=64).run(_cfg(tmp_path))
    check = report.find(f"vCPU quota {G}")
    assert check.status == "pass"
    assert check.detail == (
        "On-Demand G and VT instances: quota 64, in use 0, free 64, this stage needs up to 64: "
        "2 gpu-worker nodes (max) + 0 (a MINIMAL update adds none), x 32 vCPUs"
    )


def test_prod_quota_details_count_the_surge_for_standard_only(aws, tmp_path):
    report, _ = Fake().ready(standard_quota=79, g_quota=128).run(_stage(tmp_path, "prod"))
    standard, gpu = report.find(f"vCPU quota {STANDARD}"), report.find(f"vCPU quota {G}")
    assert standard.status == "fail"
    assert standard.detail == (
        f"{STANDARD_NAME}: quota 79, in use 0, free 79, this stage needs up to 80: "
        "4 system nodes (max) + 6 a DEFAULT update may add, x 8 vCPUs"
    )
    assert standard.fix.startswith(f"request an increase of {STANDARD} to at least 80 vCPUs")
    assert gpu.status == "pass"
    assert gpu.detail == (
        "On-Demand G and VT instances: quota 128, in use 0, free 128, this stage needs up to 128: "
        "4 gpu-worker nodes (max) + 0 (a MINIMAL update adds none), x 32 vCPUs"
    )


def test_surge_rules_are_the_ones_the_quota_check_uses(monkeypatch, tmp_path):
    # Were the system nodegroup MINIMAL, dev's standard need would drop back to max_size x vCPUs.
    monkeypatch.setitem(preflight.UPDATE_SURGE, "system", UpdateRule("MINIMAL", 1))
    assert vcpu_needs(_cfg(tmp_path))[(STANDARD, False)] == (
        8,
        "2 system nodes (max) + 0 (a MINIMAL update adds none), x 4 vCPUs",
    )
