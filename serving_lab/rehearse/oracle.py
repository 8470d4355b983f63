"""PD answers = colocated answers: the same prompts, greedy, token for token, on a real-format checkpoint.

A committed set of prompts (prompt_set: a short chat, ~2k and ~3.5k tokens, three sharing a ~2k prefix so the engines'
prefix caches may hit, a multi-turn chat) is sent at temperature 0 with `max_tokens` MAX_TOKENS and the top TOP_LOGPROBS
logprobs, one at a time and CONCURRENCY[-1] at a time, to each mode. Each answer keeps its token ids (vLLM's
`return_tokens_as_token_ids`: "token_id:N", vllm/entrypoints/openai/chat_completion/protocol.py) and each position's
top candidates. Two answers to one prompt agree when, up to and including their first divergence (after it the
contexts differ), every candidate both sides list has logprobs at most NOISE_BOUND apart, and at the divergence
each side's token is among the other's candidates and at most NOISE_BOUND below the other's first choice (its
`regret`). Identical ids with logprobs drifting further fail too: a corrupt KV cache can keep the argmax.

NOISE_BOUND, 0.5 nats, is twice the largest rounding noise measured, and 16 units in the last place of a logit in
[4, 8) in bf16 (8 significant bits: a multiple of 2**-5 there), the model's dtype. vLLM 0.26 is not batch-invariant
unless asked (vllm/envs.py VLLM_BATCH_INVARIANT): a reduction's order changes with the batch and the kernel, and the
bf16 hidden state carries the rounding through 32 layers. Measured on an H200 (evidence/2026-12-04-h200-
oracle/): the colocated engine against itself, one request in flight against sixteen, moved shared logprobs by up to
0.19 and chose tokens up to 0.094 apart, every prompt diverging within 11 tokens; PD against colocated, up to 0.25 and
0.16. A first bound of two units (0.0625), stated before that run, failed those healthy answers and the engine's own.
The seeded model's five candidates span about half a nat to a nat (its logits: normal, std 1.27, the largest under
8); a decode engine that loaded another checkpoint chose tokens outside the other side's five at the first token.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from clients import kube

MAX_TOKENS = 64
TOP_LOGPROBS = 5
CONCURRENCY = (1, 16)
NOISE_BOUND = 0.5
ANSWER_LIMIT = 4 * kube.MiB  # 64 tokens with 5 candidates each: ~30 KiB of JSON
TOKEN_PREFIX = "token_id:"


def _words(seed: int, count: int) -> str:
    """Deterministic filler text of about 6.25 tokens a word under Qwen3.5's tokenizer (vLLM counted 750 tokens for
    120 such words: evidence/2026-12-01-h200-tuned)."""
    return " ".join(f"w{(seed * 7919 + j * 104729) % 100003}" for j in range(count))


SHARED_PREFIX = "Reference document:\n" + _words(1, 320)  # ~2,000 tokens, the same in three prompts


def prompt_set() -> list[dict[str, Any]]:
    """The oracle's prompts, each {"name", "messages"}: committed here, the same on every host."""
    return [
        {
            "name": "short-chat",
            "messages": [{"role": "user", "content": "In one sentence: what does a KV cache hold?"}],
        },
        *(
            {
                "name": f"shared-2k-{tag}",
                "messages": [
                    {"role": "system", "content": SHARED_PREFIX},
                    {"role": "user", "content": f"Question {tag}: " + _words(10 + i, 12)},
                ],
            }
            for i, tag in enumerate("abc")
        ),
        {"name": "long-3.5k", "messages": [{"role": "user", "content": "Summarise: " + _words(2, 560)}]},
        {
            "name": "multi-turn",
            "messages": [
                {"role": "user", "content": "Name a prime number."},
                {"role": "assistant", "content": "Seven."},
                {"role": "user", "content": "And the next one after it? " + _words(3, 40)},
            ],
        },
    ]


@dataclass
class Answer:
    prompt: str
    token_ids: list[int] = field(default_factory=list)
    top: list[list[tuple[int, float]]] = field(default_factory=list)  # per position: (id, logprob), best first
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # the answering engine's prompt tokens it did not compute (vLLM's usage)
    seconds: float | None = None
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _token_id(text: str) -> int:
    if not isinstance(text, str) or not text.startswith(TOKEN_PREFIX):
        raise ValueError(f"a token {str(text)[:40]!r} is not {TOKEN_PREFIX}N (return_tokens_as_token_ids)")
    return int(text[len(TOKEN_PREFIX) :])


def parse_answer(prompt: str, body: dict[str, Any]) -> Answer:
    """A chat completion with logprobs -> Answer (ValueError, KeyError or TypeError when it is not one)."""
    choice = body["choices"][0]
    content = (choice.get("logprobs") or {}).get("content") or []
    answer = Answer(prompt=prompt)
    for position in content:
        answer.token_ids.append(_token_id(position["token"]))
        answer.top.append([(_token_id(c["token"]), float(c["logprob"])) for c in position.get("top_logprobs") or []])
    usage = body.get("usage") or {}
    answer.prompt_tokens = usage.get("prompt_tokens")
    answer.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return answer


def ask(base: str, model: str, prompt: dict[str, Any], timeout: float = 300) -> Answer:
    """One greedy chat completion with token ids and top logprobs; a failure is the Answer's error."""
    body = {
        "model": model,
        "messages": prompt["messages"],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
        "return_tokens_as_token_ids": True,
    }
    started = time.perf_counter()
    try:
        reply = kube.fetch(
            f"{base}/v1/chat/completions",
            method="POST",
            data=json.dumps(body).encode(),
            timeout=timeout,
            headers={"Content-Type": "application/json"},
            limit=ANSWER_LIMIT,
        )
        if reply.redirect or not 200 <= reply.status < 300:
            raise ValueError(f"HTTP {reply.status}: {' '.join(reply.body.decode(errors='replace').split())[:200]}")
        answer = parse_answer(prompt["name"], kube.parse_json(reply.body))
    except (
        OSError,
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        kube.AnswerTooLarge,
        kube.DeadlineExceeded,
    ) as exc:
        return Answer(prompt=prompt["name"], error=f"{type(exc).__name__}: {exc}"[:300])
    answer.seconds = round(time.perf_counter() - started, 3)
    return answer


def requests_for(concurrency: int, prompts: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The prompts in order, cycled to fill `concurrency` requests in flight (each at least once)."""
    count = max(concurrency, len(prompts))
    return [prompts[i % len(prompts)] for i in range(count)]


def run_round(
    ask_one: Callable[[dict[str, Any]], Answer], prompts: Sequence[dict[str, Any]], concurrency: int
) -> list[Answer]:
    """Every request of one level, `concurrency` at a time, answers in request order."""
    wanted = requests_for(concurrency, prompts)
    if concurrency <= 1:
        return [ask_one(prompt) for prompt in wanted]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(ask_one, wanted))


@dataclass(frozen=True)
class Divergence:
    """How two answers to one prompt differ: where their ids first part (None: identical ids), the top-1/top-2 margins
    there, the regret of each side's choice in the other's eyes, and the largest logprob gap up to there."""

    prompt: str
    request: int  # its index in the level's requests
    concurrency: int
    position: int | None
    margin: float | None  # the larger of the two sides' top-1/top-2 logprob margins at the divergence
    regret: float | None  # None: a side's token is not among the other's candidates (or the answers' lengths differ)
    max_logprob_delta: float

    @property
    def within_noise(self) -> bool:
        return self.max_logprob_delta <= NOISE_BOUND and (
            self.position is None or (self.regret is not None and self.regret <= NOISE_BOUND)
        )


def _margin(top: list[tuple[int, float]]) -> float | None:
    return top[0][1] - top[1][1] if len(top) >= 2 else None


def _max_delta(a: Answer, b: Answer, end: int) -> float:
    """The largest gap between two answers' logprobs of a candidate both list, at positions 0..end."""
    gap = 0.0
    for top_a, top_b in zip(a.top[: end + 1], b.top[: end + 1], strict=False):
        theirs = dict(top_b)
        gap = max([gap, *(abs(lp - theirs[t]) for t, lp in top_a if t in theirs)])
    return gap


def _regret(a: Answer, b: Answer, position: int) -> float | None:
    """How far below each side's first choice the other's token lies, by that side's logprobs (None: not listed)."""
    if position >= min(len(a.top), len(b.top)) or position >= min(len(a.token_ids), len(b.token_ids)):
        return None
    worst = 0.0
    for own, other_token in ((a.top[position], b.token_ids[position]), (b.top[position], a.token_ids[position])):
        listed = dict(own)
        if not own or other_token not in listed:
            return None
        worst = max(worst, own[0][1] - listed[other_token])
    return worst


def first_divergence(a: Answer, b: Answer, *, request: int, concurrency: int) -> Divergence | None:
    """How two answers to one prompt differ, or None where the ids are identical and the logprobs within noise."""
    position = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids, strict=False)) if x != y), None)
    if position is None and len(a.token_ids) != len(b.token_ids):
        position = min(len(a.token_ids), len(b.token_ids))
    end = position if position is not None else max(len(a.top), len(b.top))
    delta = _max_delta(a, b, end)
    if position is None and delta <= NOISE_BOUND:
        return None
    margins = [] if position is None else [_margin(t[position]) for t in (a.top, b.top) if position < len(t)]
    margin = max(margins) if len(margins) == 2 and None not in margins else None  # type: ignore[type-var]
    regret = None if position is None else _regret(a, b, position)
    return Divergence(a.prompt, request, concurrency, position, margin, regret, round(delta, 6))


Levels = dict[int, list[Answer]]  # concurrency -> the level's answers in request order


@dataclass
class Verdict:
    prompts: list[str]
    requests: int = 0
    identical: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.requests > 0 and not self.errors and all(d.within_noise for d in self.divergences)

    def to_json(self) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "requests": self.requests,
            "identical": self.identical,
            "noise_bound": NOISE_BOUND,
            "divergences": [asdict(d) | {"within_noise": d.within_noise} for d in self.divergences],
            "errors": self.errors,
            "ok": self.ok,
        }

    def lines(self) -> list[str]:
        within = sum(d.within_noise for d in self.divergences)
        out = [
            (
                f"{self.identical} of {self.requests} answers identical token for token, {within} more differ "
                f"within the noise bound ({NOISE_BOUND} nats)"
            )
        ]
        for d in self.divergences:
            where = "identical ids" if d.position is None else f"first divergence at token {d.position}"
            regret = "a token outside the other's candidates" if d.regret is None else f"regret {d.regret:.4f}"
            verdict = "within noise" if d.within_noise else "NOT within noise"
            out.append(
                f"  {d.prompt} (request {d.request} at {d.concurrency}): {where}, {regret}, largest logprob gap "
                f"{d.max_logprob_delta:.4f}: {verdict}"
            )
        out += [f"  error: {e}" for e in self.errors]
        return out


def compare(pd: Levels, colocated: Levels) -> Verdict:
    """Each request of each level, PD's answer against colocated's to the same request."""
    names = list(dict.fromkeys(a.prompt for level in colocated.values() for a in level))
    verdict = Verdict(prompts=names)
    for concurrency in sorted(set(pd) | set(colocated)):
        ours, theirs = pd.get(concurrency, []), colocated.get(concurrency, [])
        if len(ours) != len(theirs):
            verdict.errors.append(f"at {concurrency}: {len(ours)} PD answers against {len(theirs)} colocated")
            continue
        for request, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            verdict.requests += 1
            if a.error or b.error:
                verdict.errors.append(f"{a.prompt} at {concurrency}: {a.error or b.error}")
                continue
            found = first_divergence(a, b, request=request, concurrency=concurrency)
            if found is None:
                verdict.identical += 1
            else:
                verdict.divergences.append(found)
    return verdict


def informative(level: Sequence[Answer], vocab_size: int) -> dict[str, Any]:
    """That the seeded model's answers mean something: distinct prompts give distinct continuations, and the
    first token is far likelier than uniform over the vocabulary (its probability as a multiple of 1/V)."""
    by_prompt = {a.prompt: tuple(a.token_ids) for a in level if not a.error}
    firsts = [a.top[0][0][1] for a in level if a.top and a.top[0]]
    median_first = sorted(firsts)[len(firsts) // 2] if firsts else None
    return {
        "prompts": len(by_prompt),
        "distinct_continuations": len(set(by_prompt.values())),
        "first_token_logprob_median": median_first,
        "uniform_logprob": round(-math.log(vocab_size), 4),
        "first_token_vs_uniform": round(math.exp(median_first) * vocab_size, 1) if median_first is not None else None,
    }
