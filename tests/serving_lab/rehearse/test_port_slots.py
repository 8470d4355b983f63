"""The TCPStore port slots that replicas of one engine config claim on one host (serving_lab/rehearse/port_slots.py);
tests/serving_lab/rehearse/test_real_ray.py runs the hook in real Serve replicas."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from serving_lab.rehearse import port_slots


def test_the_hook_variable_is_the_one_rays_worker_reads():
    from ray._private import ray_constants

    assert port_slots.RAY_HOOK_VAR == ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR


def test_the_hook_it_displaces_is_the_one_serve_llm_gives_its_replicas():
    """llm_server.py cannot be imported without vLLM here: its source names the hook, and Ray's module has it."""
    import importlib.util

    from ray.llm._internal import serve

    server = importlib.util.find_spec("ray.llm._internal.serve.core.server.llm_server")
    assert f'"{port_slots.SERVE_LLM_HOOK}"' in Path(server.origin).read_text()
    assert callable(getattr(serve, port_slots.SERVE_LLM_HOOK.rpartition(".")[2]))


HOOKS_RUN: list[str] = []


def record_hook() -> None:
    HOOKS_RUN.append(os.environ.get("VLLM_DP_MASTER_PORT", "unset"))


@pytest.fixture
def slots(monkeypatch):
    """A clean claim: no slot held by this process, the plan's first base set, lock ports from a free one on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    monkeypatch.setattr(port_slots, "LOCK_BASE", free)
    monkeypatch.setattr(port_slots, "_held", [])
    monkeypatch.setenv(port_slots.FIRST_SLOT_VAR, "29550")
    monkeypatch.delenv("VLLM_DP_MASTER_PORT", raising=False)
    yield free
    for lock in port_slots._held:
        lock.close()


def test_a_slot_held_by_another_process_is_skipped(slots):
    with socket.socket() as other:
        other.bind(("127.0.0.1", slots))  # slot 0's lock
        port_slots.claim()
    assert os.environ["VLLM_DP_MASTER_PORT"] == "29600"  # slot 1: 29550 + 50


def test_a_second_claim_in_one_process_keeps_its_slot(slots):
    port_slots.claim()
    port_slots.claim()
    assert os.environ["VLLM_DP_MASTER_PORT"] == "29550" and len(port_slots._held) == 1


def test_with_every_slot_taken_vllm_keeps_its_own_choice(slots):
    taken = [socket.socket() for _ in range(port_slots.SLOTS)]
    try:
        for slot, lock in enumerate(taken):
            lock.bind(("127.0.0.1", slots + slot))
        port_slots.claim()
    finally:
        for lock in taken:
            lock.close()
    assert "VLLM_DP_MASTER_PORT" not in os.environ


def test_a_worker_of_an_engine_config_without_slots_is_left_alone(slots, monkeypatch):
    monkeypatch.delenv(port_slots.FIRST_SLOT_VAR)
    port_slots.claim()
    assert "VLLM_DP_MASTER_PORT" not in os.environ and port_slots._held == []


@pytest.mark.parametrize("configs", [1, 2])
def test_every_slots_window_stays_below_serves_direct_ingress_ports(configs):
    # vLLM probes base + 100 ... + 131; Serve's direct ingress takes 30000-31000 (ray/serve/_private/constants.py).
    last = port_slots.slot_base(port_slots.slot_base(port_slots.TCPSTORE_BASE, configs), port_slots.SLOTS - 1)
    assert last + 100 + 31 < 30000


def test_the_claim_then_runs_serve_llms_hook(slots, monkeypatch):
    monkeypatch.setattr(port_slots, "SERVE_LLM_HOOK", f"{__name__}.record_hook")
    HOOKS_RUN.clear()
    port_slots.claim()
    assert HOOKS_RUN == ["29550"]  # after the slot is claimed
