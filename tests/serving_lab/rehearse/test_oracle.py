"""The oracle's comparison on hand-built token streams: identical, a swap within bf16 noise, every way past it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from serving_lab.rehearse import oracle
from serving_lab.rehearse.oracle import NOISE_BOUND, Answer


def _answer(ids, *, second=None, margins=None, prompt="p", shift=0.0) -> Answer:
    """An answer whose position i lists ids[i] first and second[i] (default 0) margins[i] below it, every logprob
    moved by `shift` (what rounding moves)."""
    margins = margins or [1.0] * len(ids)
    second = second or [0] * len(ids)
    top = [[(t, -1.0 + shift), (s, -1.0 - m + shift)] for t, s, m in zip(ids, second, margins, strict=True)]
    return Answer(prompt=prompt, token_ids=list(ids), top=top)


def test_identical_answers_pass():
    verdict = oracle.compare({1: [_answer([5, 6, 7])]}, {1: [_answer([5, 6, 7])]})
    assert (verdict.ok, verdict.identical, verdict.requests, verdict.divergences) == (True, 1, 1, [])


def test_a_divergence_between_near_ties_within_the_bound_passes_and_is_reported():
    pd = _answer([5, 9, 1], second=[0, 6, 0], margins=[1.0, 0.03125, 1.0])
    colocated = _answer([5, 6, 2], second=[0, 9, 0], margins=[1.0, 0.0625, 1.0])
    verdict = oracle.compare({16: [pd]}, {16: [colocated]})
    (found,) = verdict.divergences
    assert (found.position, found.margin, found.regret, found.within_noise) == (1, 0.0625, 0.0625, True)
    assert verdict.ok and verdict.identical == 0


def test_a_choice_further_below_the_others_first_than_the_bound_fails():
    pd = _answer([5, 9], second=[0, 6], margins=[1.0, NOISE_BOUND * 1.5])
    colocated = _answer([5, 6], second=[0, 9], margins=[1.0, 0.01])
    found = oracle.compare({1: [pd]}, {1: [colocated]}).divergences[0]
    assert found.regret == NOISE_BOUND * 1.5 and not found.within_noise


def test_a_token_outside_the_others_candidates_fails_however_close_the_margins():
    pd = _answer([5, 9], second=[0, 3], margins=[1.0, 0.001])
    colocated = _answer([5, 6], second=[0, 4], margins=[1.0, 0.001])
    found = oracle.compare({1: [pd]}, {1: [colocated]}).divergences[0]
    assert (found.regret, found.within_noise) == (None, False)


def test_identical_ids_with_logprobs_drifting_past_the_bound_fail():
    # a corrupt KV cache can keep the argmax: the logprobs say it
    verdict = oracle.compare({1: [_answer([5, 6], shift=NOISE_BOUND * 2)]}, {1: [_answer([5, 6])]})
    (found,) = verdict.divergences
    assert (found.position, found.max_logprob_delta, verdict.ok) == (None, NOISE_BOUND * 2, False)


def test_identical_ids_with_logprobs_within_the_bound_count_as_identical():
    verdict = oracle.compare({1: [_answer([5, 6], shift=NOISE_BOUND / 2)]}, {1: [_answer([5, 6])]})
    assert (verdict.identical, verdict.divergences, verdict.ok) == (1, [], True)


def test_an_answer_cut_short_diverges_where_it_ends():
    verdict = oracle.compare({1: [_answer([5, 6, 7])]}, {1: [_answer([5, 6])]})
    assert not verdict.ok and verdict.divergences[0].position == 2 and verdict.divergences[0].regret is None


def test_only_the_first_divergence_counts():
    pd = _answer([5, 9, 1, 1], second=[0, 6, 0, 0], margins=[1.0, 0.01, 1.0, 1.0])
    colocated = _answer([5, 6, 2, 3], second=[0, 9, 0, 0], margins=[1.0, 0.01, 1.0, 1.0])
    verdict = oracle.compare({1: [pd]}, {1: [colocated]})
    assert [d.position for d in verdict.divergences] == [1] and verdict.ok


def test_a_failed_request_or_a_missing_level_fails_the_verdict():
    failed = Answer(prompt="p", error="HTTP 500: boom")
    assert "HTTP 500" in oracle.compare({1: [failed]}, {1: [_answer([1])]}).errors[0]
    assert not oracle.compare({1: [_answer([1])], 16: [_answer([1])]}, {1: [_answer([1])]}).ok
    assert not oracle.compare({}, {}).ok  # nothing compared is not a pass


def test_requests_cycle_the_prompts_to_fill_the_level():
    prompts = oracle.prompt_set()
    assert oracle.requests_for(1, prompts) == prompts
    sixteen = oracle.requests_for(16, prompts)
    assert len(sixteen) == 16 and sixteen[len(prompts)] == prompts[0]


def test_the_prompt_set_has_a_shared_prefix_a_long_prompt_and_a_multi_turn_chat():
    prompts = {p["name"]: p["messages"] for p in oracle.prompt_set()}
    shared = [m for name, m in prompts.items() if name.startswith("shared-2k-")]
    assert (
        len(shared) == 3 and len({m[0]["content"] for m in shared}) == 1 and len({m[1]["content"] for m in shared}) == 3
    )
    assert len(prompts["long-3.5k"][0]["content"].split()) == 561  # ~3,500 tokens at ~6.25 a word
    assert [m["role"] for m in prompts["multi-turn"]] == ["user", "assistant", "user"]


def test_an_answer_is_parsed_to_token_ids_and_candidates():
    body = {
        "choices": [
            {
                "logprobs": {
                    "content": [
                        {
                            "token": "token_id:17",
                            "logprob": -0.5,
                            "top_logprobs": [
                                {"token": "token_id:17", "logprob": -0.5},
                                {"token": "token_id:4", "logprob": -1.25},
                            ],
                        }
                    ]
                }
            }
        ],
        "usage": {"prompt_tokens": 750, "prompt_tokens_details": {"cached_tokens": 749}},
    }
    answer = oracle.parse_answer("p", body)
    assert (answer.token_ids, answer.top, answer.prompt_tokens, answer.cached_tokens) == (
        [17],
        [[(17, -0.5), (4, -1.25)]],
        750,
        749,
    )


def test_a_token_without_its_id_is_refused():
    body = {"choices": [{"logprobs": {"content": [{"token": "hello", "logprob": -1.0}]}}]}
    with pytest.raises(ValueError, match="not token_id:N"):
        oracle.parse_answer("p", body)


class _Server(BaseHTTPRequestHandler):
    status = 200
    bodies: ClassVar[list] = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        _Server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        data = json.dumps({"choices": [{"logprobs": {"content": []}}]} if self.status == 200 else {"e": "x"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    _Server.status, _Server.bodies = 200, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_request_is_greedy_with_ids_and_top_logprobs(server):
    oracle.ask(server, "m", oracle.prompt_set()[0])
    (sent,) = _Server.bodies
    assert (sent["temperature"], sent["max_tokens"], sent["top_logprobs"], sent["return_tokens_as_token_ids"]) == (
        0,
        oracle.MAX_TOKENS,
        oracle.TOP_LOGPROBS,
        True,
    )


def test_an_http_error_is_the_answers_error_not_an_exception(server):
    _Server.status = 500
    answer = oracle.ask(server, "m", oracle.prompt_set()[0])
    assert answer.error.startswith("ValueError: HTTP 500") and answer.token_ids == []


def test_the_seeded_models_answers_are_called_informative_by_their_figures():
    level = [_answer([1, 2], prompt="a"), _answer([3, 4], prompt="b"), _answer([1, 2], prompt="c")]
    found = oracle.informative(level, vocab_size=1000)
    assert (found["prompts"], found["distinct_continuations"]) == (3, 2)
    assert found["first_token_vs_uniform"] == pytest.approx(367.9, abs=0.1)  # e**-1 x 1000
