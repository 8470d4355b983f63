"""Issue #53's graph arms engine by engine: the arms a command line may name, each arm's engine settings from the
rehearsal's own plan on the emulated budget, an arm run end to end on a stand-in vllm (its figures and its failure),
and the table that compares them."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import pytest

from serving_lab.rehearse import floors, graph_arms
from serving_lab.rehearse.graph_arms import Arm
from serving_lab.rehearse.host import Gpu, Host

from . import fake_vllm

ONE_H200 = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"),), efa_devices=())
MODEL = Path("/tmp/ckpt-0")
# vLLM's own start-up lines, as engine_memory.py reads them
STARTED = (
    "print('Model loading took 16.84 GiB memory and 3.1 seconds')\n"
    "print('GPU KV cache size: 60,695 tokens')\n"
    "print('Graph capturing finished in 2 secs, took 0.08 GiB')\n"
)


def test_arms_are_read_from_the_allowlist_and_a_repeat_is_a_second_start():
    arms = graph_arms.parse_arms("today,vllm-default@512,breakable,vllm-default@512")
    assert arms == [Arm("today"), Arm("vllm-default", 512), Arm("breakable"), Arm("vllm-default", 512, 2)]
    assert [arm.label for arm in arms] == ["today", "vllm-default@512", "breakable", "vllm-default@512.start2"]


ALLOWED = "(allowed: vllm-default, breakable, decode-only, each also with @N), or today"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("today@512", f"'today@512' {ALLOWED}"),
        ("eager", f"'eager' {ALLOWED}"),
        ("breakable@0", "breakable@0: @N from 1 to 8192, or today"),
        ("breakable@99999", f"'breakable@99999' {ALLOWED}"),
        ("today,", f"'' {ALLOWED}"),
        (",".join(["today"] * 9), "9 arms (allowed: 1 to 8, comma-separated)"),
    ],
)
def test_an_arm_outside_the_allowlist_is_refused_in_one_line(text, said):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        graph_arms.parse_arms(text)
    assert str(refused.value) == said


def test_todays_arm_is_the_stages_engine_on_the_emulated_budget_sizing_its_own_kv_cache(dev):
    settings, env = graph_arms.arm_engine(dev, ONE_H200, MODEL, Arm("today"))
    assert "compilation_config" not in settings and settings["max_cudagraph_capture_size"] == 512
    assert settings["gpu_memory_utilization"] == 0.1441 and settings["model"] == str(MODEL)
    # each arm's own KV figure is what the table compares: the stage's fixed size is not handed to the engine
    assert "kv_cache_memory_bytes" not in settings
    assert "kv_transfer_config" not in settings and "VLLM_USE_BREAKABLE_CUDAGRAPH" not in env


def test_the_decode_only_arm_is_the_stages_engine_until_2026_12_05(dev):
    settings, _ = graph_arms.arm_engine(dev, ONE_H200, MODEL, Arm("decode-only"))
    assert settings["compilation_config"] == {
        "mode": 0,
        "cudagraph_mode": "FULL_DECODE_ONLY",
        "max_cudagraph_capture_size": 32,
    }
    assert "max_cudagraph_capture_size" not in settings


def test_vllms_default_arm_at_n_tokens_leaves_vllm_its_modes_and_sets_only_the_capture_size(dev):
    settings, _ = graph_arms.arm_engine(dev, ONE_H200, MODEL, Arm("vllm-default", 512))
    assert settings["compilation_config"] == {"max_cudagraph_capture_size": 512}


def test_the_breakable_arm_captures_piecewise_without_compile_through_vllms_variable(dev):
    settings, env = graph_arms.arm_engine(dev, ONE_H200, MODEL, Arm("breakable", 512))
    assert settings["compilation_config"] == {
        "mode": 0, "cudagraph_mode": "FULL_AND_PIECEWISE", "max_cudagraph_capture_size": 512
    }  # fmt: skip
    assert env["VLLM_USE_BREAKABLE_CUDAGRAPH"] == "1"


def test_the_logprob_gap_is_the_largest_difference_over_the_tokens_both_lists_hold():
    assert graph_arms.logprob_gap([[5, -0.5], [6, -1.5], [7, -3.0]], [[6, -1.25], [5, -0.5], [8, -2.0]]) == 0.25
    assert graph_arms.logprob_gap([[5, -0.5]], [[6, -0.5]]) == math.inf  # nothing in common: not the same prefill


def _first_tokens(shift: float, batched_shift: float) -> dict:
    singly = [[[1, -0.5 + shift], [2, -1.5]], [[3, -0.7], [4, -2.0]]]
    return {"lengths": [61, 97], "singly": singly, "batched": [[[1, -0.5 + shift + batched_shift], [2, -1.5]]]}


def test_an_arms_gaps_are_against_the_first_arm_one_at_a_time_and_against_itself_batched():
    reference = {"first_tokens": _first_tokens(0.0, 0.0)}
    row = {"first_tokens": _first_tokens(0.125, 0.5)}
    assert graph_arms.first_token_gaps(row, reference) == (0.125, 0.5)


def _run(tmp_path: Path, llm_init: str) -> graph_arms.ArmRun:
    site = fake_vllm.install(tmp_path / "site", llm_init)
    return graph_arms.ArmRun(tmp_path, {**os.environ, "PYTHONPATH": str(site)}, timeout=120, python=sys.executable)


def test_an_arm_runs_its_engine_alone_and_its_row_holds_vllms_lines_and_the_probe(tmp_path, dev):
    arm = Arm("breakable", 512)
    settings, env = graph_arms.arm_engine(dev, ONE_H200, MODEL, arm)
    row = graph_arms.run_arm(arm, settings, env, _run(tmp_path, STARTED))
    assert row["vllm"]["kv_cache_tokens"] == 60695 and row["vllm"]["cuda_graph_gib"] == 0.08
    assert row["arm"] == "breakable@512" and row["settings"] == settings
    assert "first_token_256" in row["medians"]
    assert [len(top) for top in row["first_tokens"]["singly"]] == [2] * 6 and len(row["first_tokens"]["batched"]) == 4
    assert (tmp_path / "breakable@512.log").is_file()


def test_an_arm_whose_engine_fails_names_its_log_and_the_last_error(tmp_path, dev):
    arm = Arm("today")
    settings, env = graph_arms.arm_engine(dev, ONE_H200, MODEL, arm)
    row = graph_arms.run_arm(arm, settings, env, _run(tmp_path, "raise RuntimeError('CUDA error: out of memory')\n"))
    assert row["error"].startswith(f"{tmp_path / 'today.log'}: exit 1: RuntimeError: CUDA error: out of memory")
    assert "medians" not in row


def _row(arm: str, first_256: float, shift: float = 0.0) -> dict:
    medians = {"first_token_256": first_256, "first_token_3500": 0.5, "first_token_16x256": 0.3,
               "decode_step_1": 0.0062, "decode_step_16": 0.008}  # fmt: skip
    probe = {"prompt_tokens": [256, 3500]}
    vllm = {"kv_cache_tokens": 60695, "cuda_graph_gib": 0.08, "cuda_graph_seconds": 2.0, "weights_gib": 16.84}
    return {"arm": arm, "vllm": vllm, "medians": medians, "probe": probe, "start_seconds": 40.1,
            "first_tokens": _first_tokens(shift, 0.0625)}  # fmt: skip


def test_the_table_puts_each_arm_on_a_line_against_the_first_arm():
    rows = [_row("today", 0.0981), _row("vllm-default@512", 0.03, shift=0.25)]
    rows.append({"arm": "breakable@512", "vllm": {}, "error": "b.log: exit 1: boom"})
    lines = graph_arms.table(rows, None).splitlines()
    assert lines[1] == ("today | 60,695 | 0.08/2.0 | - | 40.1 | 98.1 / 500.0 / 300.0 | 6.2 / 8.0 | 0.000 / 0.062")
    assert lines[2].endswith("| 30.0 / 500.0 / 300.0 | 6.2 / 8.0 | 0.250 / 0.062")
    assert lines[3] == "breakable@512 | - | failed: b.log: exit 1: boom"


def test_the_table_states_the_first_token_and_decode_step_over_their_floors():
    weights = floors.Model(16.84 * 2**30, 248320 * 4096, False)
    floor = lambda tokens: floors.Floors.of(floors.PEAKS["NVIDIA H200"], weights, tokens)
    line = graph_arms.table([_row("today", 0.0981)], floor).splitlines()[1]
    prefill, step = floor(256).prefill_s, floor(256).weight_read_s
    assert f"98.1 ({0.0981 / prefill:.1f}x)" in line and f"6.2 ({0.0062 / step:.1f}x)" in line


def test_the_command_refuses_weights_without_a_config_in_one_line(tmp_path, capsys):
    code = graph_arms.main(["--stage", "dev", "--weights", str(tmp_path), "--arms", "today", "--out", str(tmp_path)])
    assert code == 2
    assert (
        capsys.readouterr().err
        == f"graph_arms: --weights: {tmp_path} has no config.json (a Hugging Face model folder)\n"
    )


def test_an_interrupt_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(graph_arms.host, "detect", lambda *a, **k: ONE_H200)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(graph_arms, "measure_arms", interrupted)
    argv = ["--stage", "dev", "--weights", str(tmp_path), "--arms", "today", "--out", str(tmp_path)]
    assert graph_arms.main(argv) == 130
    assert capsys.readouterr().err == "graph_arms: interrupted\n"


def test_the_command_runs_each_arm_prints_the_table_and_writes_arms_json(tmp_path, capsys, monkeypatch):
    weights = tmp_path / "weights"
    weights.mkdir()
    (weights / "config.json").write_text(json.dumps({"text_config": {"vocab_size": 248320, "hidden_size": 4096}}))
    site = fake_vllm.install(tmp_path / "site", STARTED)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(graph_arms.host, "detect", lambda *a, **k: ONE_H200)
    argv = ["--stage", "dev", "--weights", str(weights), "--arms", "today,today", "--out", str(tmp_path / "out")]
    assert graph_arms.main(argv) == 0
    table = capsys.readouterr().out.splitlines()[-3:]
    assert [line.split(" | ")[0] for line in table] == ["arm", "today", "today.start2"]
    assert "x)" in table[1]  # the H200's floors, from the loaded weights and the model's config
    saved = json.loads((tmp_path / "out" / "dev" / "graph-arms" / "arms.json").read_text())
    assert [row["arm"] for row in saved["arms"]] == ["today", "today.start2"]


def test_a_stage_the_plan_refuses_on_this_host_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "config.json").write_text("{}")
    mixed = Host(gpus=(Gpu("NVIDIA H200", 143771, "9.0"), Gpu("NVIDIA H100 80GB HBM3", 81559, "9.0")), efa_devices=())
    monkeypatch.setattr(graph_arms.host, "detect", lambda *a, **k: mixed)
    argv = ["--stage", "dev", "--weights", str(tmp_path), "--arms", "today", "--out", str(tmp_path)]
    assert graph_arms.main(argv) == 2
    said = capsys.readouterr().err
    assert said.startswith("graph_arms: --emulate-node: the host's GPUs differ in memory") and said.count("\n") == 1
