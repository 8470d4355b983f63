"""One engine alone, offline (`vllm.LLM`), started from a plan's engine settings and, on request, timed: the
engine's own first token at a few prompt lengths, one prompt and a batch at a time, its decode step, and the first
token's logprobs for fixed prompts, so that two arms of one host can be compared.

    python3 -m serving_lab.rehearse.engine_alone SETTINGS_JSON [RESULT_JSON]

SETTINGS_JSON is a plan engine's `vllm.LLM` keyword arguments (kv_profile.engine_args). Without RESULT_JSON the
engine only starts, as kv_profile's sizing needs; with it the probe below runs and its figures are written there.
Timings are wall-clock around `LLM.generate` with prompts given as token ids (no tokenizer, no template): what the
engine adds to a request, not what Serve does. The first token's logprobs (first_tokens) compare what two arms'
prefills computed, where greedy answers of a seeded checkpoint part at the first near-tie. Runs where vLLM is
installed (the GPU host); the probe's schedule and arithmetic are tested on CPU with a stand-in engine
(tests/serving_lab/rehearse/test_engine_alone.py)."""

from __future__ import annotations

import dataclasses
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# generate(prompts as token ids, tokens to generate each) -> each prompt's generated token ids
Generate = Callable[[list[list[int]], int], list[list[int]]]
# score(prompts) -> each prompt's first token: its TOP_LOGPROBS likeliest token ids and their logprobs, likeliest first
Score = Callable[[list[list[int]]], list[list[tuple[int, float]]]]
TOP_LOGPROBS = 20
# Prompts whose first token is scored one at a time, and the first BATCHED of them (458 tokens) in one batch: lengths
# off vLLM's capture sizes, so that a graph replays padded and mixed, and 600 beyond 512 tokens as a control.
SCORED = (61, 97, 130, 170, 270, 600)
BATCHED = 4
# Token ids drawn for prompts: above the ids a tokenizer keeps for bytes and below its special tokens at the top,
# for a vocabulary over 100,000 (Qwen3.5's: 248,320, serving_lab/pins/qwen3.5-9b-config.json).
TOKEN_IDS = range(1000, 100_000)


def engine_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings less the OpenAI frontend's, which Ray Serve LLM hands to the frontend and `vllm.LLM` refuses
    (ray/llm/_internal/serve/engines/vllm/vllm_models.py splits engine_kwargs by vLLM's FrontendArgs fields)."""
    from vllm.entrypoints.openai.cli_args import FrontendArgs

    frontend = {field.name for field in dataclasses.fields(FrontendArgs)}
    return {key: value for key, value in settings.items() if key not in frontend}


def start(settings: dict[str, Any]) -> Any:
    """The engine of these settings, started (vLLM prints its memory and start-up lines meanwhile)."""
    from vllm import LLM

    return LLM(**engine_settings(settings))


@dataclass(frozen=True)
class Probe:
    """What is timed: each prompt length one prompt at a time, `batch` prompts of the first length at once, and
    decode steps at one and `batch` sequences."""

    prompt_tokens: tuple[int, ...] = (256, 3500)
    samples: int = 12
    batch: int = 16
    decode_tokens: int = 64


def prompts(count: int, length: int, seed: int) -> list[list[int]]:
    """`count` prompts of `length` token ids, the same for the same seed on every host."""
    draw = random.Random(seed)
    return [[draw.choice(TOKEN_IDS) for _ in range(length)] for _ in range(count)]


def _wall(generate: Generate, clock: Callable[[], float], batch: list[list[int]], tokens: int) -> float:
    began = clock()
    generate(batch, tokens)
    return clock() - began


def first_tokens(score: Score) -> dict[str, Any]:
    """The first token's logprobs for the SCORED prompts, one at a time and the first BATCHED in one batch: what
    a prefill computed, comparable between arms where greedy answers part at the first near-tie."""
    scored = [prompts(1, length, 100 + n)[0] for n, length in enumerate(SCORED)]
    singly = [score([ids])[0] for ids in scored]
    return {"lengths": list(SCORED), "singly": singly, "batched": score(scored[:BATCHED])}


def measure(generate: Generate, probe: Probe, clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """The probe's timings (seconds); every timed request has prompts of its own (no prefix
    cache hit), and one untimed round of each shape runs first (the engine's first use of a shape)."""
    seeds = iter(range(1, 1_000_000))
    for length in probe.prompt_tokens:
        generate(prompts(1, length, next(seeds)), 1 + probe.decode_tokens)
    generate(prompts(probe.batch, probe.prompt_tokens[0], next(seeds)), 1 + probe.decode_tokens)
    samples: dict[str, list[float]] = {}
    for length in probe.prompt_tokens:
        samples[f"first_token_{length}"] = [
            _wall(generate, clock, prompts(1, length, next(seeds)), 1) for _ in range(probe.samples)
        ]
    for width in (1, probe.batch):
        shape = (width, probe.prompt_tokens[0])
        firsts = [_wall(generate, clock, prompts(*shape, next(seeds)), 1) for _ in range(probe.samples // 2)]
        wholes = [_wall(generate, clock, prompts(*shape, next(seeds)), 1 + probe.decode_tokens) for _ in firsts]
        samples[f"first_token_{width}x{shape[1]}"] = firsts
        samples[f"decode_step_{width}"] = [
            (whole - statistics.median(firsts)) / probe.decode_tokens for whole in wholes
        ]
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {"probe": dataclasses.asdict(probe), "medians": medians, "samples": samples}


def vllm_generate(llm: Any) -> Generate:
    """`generate` on a started engine: greedy, the end-of-sequence token ignored, no detokenizing."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    def generate(batch: list[list[int]], tokens: int) -> list[list[int]]:
        params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True, detokenize=False)
        outputs = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in batch], params, use_tqdm=False)
        return [list(output.outputs[0].token_ids) for output in outputs]

    return generate


def vllm_score(llm: Any) -> Score:
    """`score` on a started engine: one greedy token with its position's top logprobs (vllm/logprobs.py)."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    def score(batch: list[list[int]]) -> list[list[tuple[int, float]]]:
        params = SamplingParams(temperature=0.0, max_tokens=1, logprobs=TOP_LOGPROBS, detokenize=False)
        outputs = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in batch], params, use_tqdm=False)
        tops = [output.outputs[0].logprobs[0] for output in outputs]
        return [sorted(((tid, lp.logprob) for tid, lp in top.items()), key=lambda pair: -pair[1]) for top in tops]

    return score


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (1, 2):
        print("usage: python3 -m serving_lab.rehearse.engine_alone SETTINGS_JSON [RESULT_JSON]", file=sys.stderr)
        return 2
    began = time.perf_counter()
    llm = start(json.loads(args[0]))
    started = time.perf_counter() - began
    if len(args) == 2:
        timed = measure(vllm_generate(llm), Probe())
        result = {"start_seconds": round(started, 2), **timed, "first_tokens": first_tokens(vllm_score(llm))}
        Path(args[1]).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
