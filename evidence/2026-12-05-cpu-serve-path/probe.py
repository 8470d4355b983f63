"""What Ray Serve LLM's own path adds to the first token, colocated and PD, per stream-batching arm (issue #53).

    /tmp/servecpu/bin/python evidence/2026-12-05-cpu-serve-path/probe.py [--ingress serve_proxy] [--rounds 2]

Runs the real Ray 2.58 `build_openai_app` and `build_pd_openai_app` on a local Ray, with paced_engine.py in place of
vLLM (timed as the H100's compiled engine on the L4 budget, evidence/2026-12-05-h100-compiled-graphs), so the
engines take the same time in every arm and what moves is Serve's. Needs a Python with ray[serve,llm]==2.58.0 and
vllm==0.26.0 (Serve LLM's request models import vLLM's); see README.md. Prints one row per round, mode, arm and level.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the project's own bootstrap (pure Python: no project venv needed)
from serving_lab.bench.goodput import median_bootstrap

# The H100's compiled engine, one request at a time (ms): first token at 256 tokens, decode step, and in PD the decode
# side's KV pull with its first step (4.1 + 8.7, the phase table of 2026-12-05-h100-compiled-graphs).
PACE = {"prefill_ms": 23.6, "pull_ms": 12.8, "step_ms": 6.8}
ENGINE_FIRST_TOKEN_MS = {"colocated": PACE["prefill_ms"], "pd": PACE["prefill_ms"] + PACE["pull_ms"]}
# interval_ms, first_flush: Ray's default, two shorter ticks, and PR #64534's first flush on Ray's default tick
ARMS = {"tick50": (50, False), "tick10": (10, False), "tick0": (0, False), "first-flush50": (50, True)}
OUTPUT_TOKENS = 64
REQUESTS = {1: 40, 4: 80, 16: 160}
URL = "http://127.0.0.1:8000/v1/chat/completions"
# Serve's variables per ingress, read when a process imports Serve (charts/serve_ingress.py has the stage's list:
# haproxy-direct is its `haproxy` in PD mode). HAProxy's connection limit fits this machine's 20,000 open files.
INGRESS_ENV = {
    "serve_proxy": {},
    "haproxy": {"RAY_SERVE_ENABLE_HA_PROXY": "1", "RAY_SERVE_HAPROXY_MAXCONN": "1024"},
    "haproxy-direct": {
        "RAY_SERVE_ENABLE_HA_PROXY": "1",
        "RAY_SERVE_HAPROXY_MAXCONN": "1024",
        "RAY_SERVE_LLM_ENABLE_DIRECT_STREAMING": "1",
    },
}


def llm_config(arm: str, replicas: int, side: str | None) -> dict:
    interval_ms, first_flush = ARMS[arm]
    config = {
        "model_loading_config": {"model_id": "qwen3.5-9b", "model_source": "qwen3.5-9b"},
        "deployment_config": {"num_replicas": replicas},
        "placement_group_config": {"bundles": [{"CPU": 1}]},
        "engine_kwargs": {},
        "experimental_configs": {
            "stream_batching_interval_ms": interval_ms,
            "paced": {**PACE, "first_flush": first_flush},
        },
    }
    if side is not None:
        role = {"prefill": "kv_producer", "decode": "kv_consumer"}[side]
        config["engine_kwargs"]["kv_transfer_config"] = {
            "kv_connector": "NixlConnector",
            "kv_role": role,
            "engine_id": side,
        }
    return config


def application(mode: str, arm: str):
    from ray.serve.llm import build_openai_app, build_pd_openai_app

    if mode == "pd":
        return build_pd_openai_app(
            {"prefill_config": llm_config(arm, 1, "prefill"), "decode_config": llm_config(arm, 1, "decode")}
        )
    return build_openai_app({"llm_configs": [llm_config(arm, 2, None)]})  # the same two engines as PD's


async def one_request(client, prompt: str) -> tuple[float, float, float]:
    """(TTFT, ms per token after the first, the last token) in ms, from the SSE events' arrival times."""
    body = {
        "model": "qwen3.5-9b",
        "stream": True,
        "max_tokens": OUTPUT_TOKENS,
        "messages": [{"role": "user", "content": prompt}],
    }
    started = time.perf_counter()
    arrivals = []
    async with client.stream("POST", URL, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                arrivals.append(time.perf_counter())
    if len(arrivals) != OUTPUT_TOKENS:
        raise RuntimeError(f"{len(arrivals)} tokens streamed, not {OUTPUT_TOKENS}")
    first, last = (arrivals[0] - started) * 1000, (arrivals[-1] - started) * 1000
    return first, (last - first) / (OUTPUT_TOKENS - 1), last


async def level(streams: int, requests: int) -> list[tuple[float, float, float]]:
    import httpx

    results: list[tuple[float, float, float]] = []
    queue = list(range(requests))
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=streams)) as client:
        for _ in range(3):  # warm the path: connections, handles, the first-request code paths
            await one_request(client, "warm")

        async def stream():
            while queue:
                index = queue.pop()
                results.append(await one_request(client, f"request {index} " + "w " * 200))

        await asyncio.gather(*(stream() for _ in range(streams)))
    return results


def row(round_: int, mode: str, arm: str, streams: int, results: list[tuple[float, float, float]]) -> str:
    ttft, per_token, last = (median_bootstrap([r[i] for r in results]) for i in range(3))
    outside = ttft.ms - ENGINE_FIRST_TOKEN_MS[mode]
    return (
        f"{round_}\t{mode}\t{arm}\t{streams}\t{len(results)}\t"
        f"{ttft.ms:.1f} ({ttft.low:.1f}-{ttft.high:.1f})\t{outside:.1f}\t"
        f"{per_token.ms:.2f} ({per_token.low:.2f}-{per_token.high:.2f})\t{last.ms:.1f} ({last.low:.1f}-{last.high:.1f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingress", choices=sorted(INGRESS_ENV), default="serve_proxy")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--levels", default="1,4,16")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--modes", default="colocated,pd")
    args = parser.parse_args()
    os.environ.update(INGRESS_ENV[args.ingress])
    os.environ["PYTHONPATH"] = str(HERE)  # the raylet and its workers inherit it: they import paced_engine
    os.environ["RAYLLM_VLLM_ENGINE_CLS"] = "paced_engine:PacedEngine"
    sys.path.insert(0, str(HERE))
    import ray
    from ray import serve

    ray.init(num_cpus=16, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    print(f"ingress {args.ingress}")
    print(
        "round\tmode\tarm\tstreams\trequests\tTTFT p50 ms (95%)\toutside engines ms\tms per token p50 (95%)\tlast token p50 ms (95%)"
    )
    for round_ in range(1, args.rounds + 1):
        for mode in args.modes.split(","):
            for arm in args.arms.split(","):
                serve.run(application(mode, arm), name="llm", route_prefix="/")
                for streams in (int(s) for s in args.levels.split(",")):
                    results = asyncio.run(level(streams, REQUESTS[streams]))
                    print(row(round_, mode, arm, streams, results), flush=True)
                serve.delete("llm")
    serve.shutdown()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
