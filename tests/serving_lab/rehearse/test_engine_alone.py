"""One engine alone, timed: the probe's schedule (fresh prompts for every timed request, one untimed round of each
shape first), its arithmetic on a stand-in engine and clock, and the command end to end on a stand-in vllm."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from serving_lab.rehearse import engine_alone
from serving_lab.rehearse.engine_alone import Probe
from serving_lab.rehearse.ray_cluster import CHECKOUT

from . import fake_vllm

SMALL = Probe(prompt_tokens=(8, 20), samples=4, batch=3, decode_tokens=10)


class Engine:
    """Takes 1 ms a prompt token and 2 ms a generated token after the first, whatever the batch: a known clock."""

    def __init__(self):
        self.now, self.calls = 0.0, []

    def clock(self) -> float:
        return self.now

    def generate(self, batch, tokens):
        self.calls.append((batch, tokens))
        self.now += 0.001 * sum(map(len, batch)) + 0.002 * (tokens - 1)
        return [ids[:tokens] for ids in batch]


def test_prompts_are_the_same_for_a_seed_and_differ_between_seeds():
    assert engine_alone.prompts(2, 50, 7) == engine_alone.prompts(2, 50, 7)
    first, second = engine_alone.prompts(2, 50, 7)
    assert first != second and len(first) == 50
    assert engine_alone.prompts(1, 50, 8)[0] not in (first, second)
    assert all(token in engine_alone.TOKEN_IDS for token in first)


def test_the_probe_times_each_shape_from_the_known_clock():
    engine = Engine()
    medians = engine_alone.measure(engine.generate, SMALL, engine.clock)["medians"]
    assert {name: round(value, 9) for name, value in medians.items()} == {
        "first_token_8": 0.008, "first_token_20": 0.02, "first_token_1x8": 0.008, "first_token_3x8": 0.024,
        "decode_step_1": 0.002, "decode_step_3": 0.002,
    }  # fmt: skip


def test_no_timed_request_repeats_a_prompt_the_engine_saw_before():
    engine = Engine()
    engine_alone.measure(engine.generate, SMALL, engine.clock)
    seen = [tuple(ids) for batch, _ in engine.calls for ids in batch]
    assert len(seen) == len(set(seen))


def test_each_shape_runs_once_untimed_before_it_is_timed():
    engine = Engine()
    result = engine_alone.measure(engine.generate, SMALL, engine.clock)
    warmups = [(len(batch), len(batch[0]), tokens) for batch, tokens in engine.calls[:3]]
    assert warmups == [(1, 8, 11), (1, 20, 11), (3, 8, 11)]
    assert len(result["samples"]["first_token_8"]) == 4 and len(result["samples"]["decode_step_3"]) == 2


def test_the_command_starts_the_engine_without_the_frontends_settings_and_writes_the_probe(tmp_path):
    site = fake_vllm.install(
        tmp_path / "site", f"open({str(tmp_path / 'called.json')!r}, 'w').write(json.dumps(kwargs))\n"
    )
    settings = {"model": "/m", "max_num_seqs": 32, "enable_prompt_tokens_details": True}
    done = subprocess.run(
        [sys.executable, "-m", "serving_lab.rehearse.engine_alone", json.dumps(settings), str(tmp_path / "r.json")],
        env={**os.environ, "PYTHONPATH": str(site)}, cwd=CHECKOUT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "called.json").read_text()) == {"model": "/m", "max_num_seqs": 32}
    result = json.loads((tmp_path / "r.json").read_text())
    assert set(result["medians"]) == {
        "first_token_256", "first_token_3500", "first_token_1x256", "first_token_16x256", "decode_step_1",
        "decode_step_16",
    }  # fmt: skip
    assert [len(top) for top in result["first_tokens"]["singly"]] == [2] * len(engine_alone.SCORED)
    assert result["start_seconds"] >= 0


def test_the_command_refuses_other_arguments_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "serving_lab.rehearse.engine_alone"], cwd=CHECKOUT, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_the_first_tokens_are_scored_one_at_a_time_then_the_first_few_in_one_batch():
    batches = []

    def score(batch):
        batches.append([len(ids) for ids in batch])
        return [[(ids[0], -0.5)] for ids in batch]

    scored = engine_alone.first_tokens(score)
    assert batches == [[n] for n in engine_alone.SCORED] + [list(engine_alone.SCORED[: engine_alone.BATCHED])]
    assert scored["batched"] == scored["singly"][: engine_alone.BATCHED]  # the same prompts both ways
    assert sum(engine_alone.SCORED[: engine_alone.BATCHED]) <= 512 < engine_alone.SCORED[-1]
