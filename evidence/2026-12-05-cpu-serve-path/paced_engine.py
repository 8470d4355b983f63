"""An engine of fixed timing for Ray Serve LLM's own path (issue #53, CPU probe; not product code).

Serve LLM loads it in place of VLLMEngine through its own hook, RAYLLM_VLLM_ENGINE_CLS
(ray/llm/_internal/serve/core/server/llm_server.py `_get_default_engine_class`). Each request takes the times
of LLMConfig.experimental_configs["paced"], whatever else is in flight, so every difference between arms is Serve's:
  prefill_ms     a prompt's prefill (colocated: before the first token; PD: the prefill server's whole answer)
  pull_ms        PD decode only: the KV pull and the first step before the first token
  step_ms        each further token
A stream yields one SSE event per token, as vLLM's OpenAI server does. `first_flush: true` swaps the server's
Batcher for one that sends the first result at once (what ray-project/ray PR #64534 proposes), in this process only.
With direct streaming a replica serves the engine's own ASGI app (`build_asgi_app`), as it serves vLLM's OpenAI app
(ray/llm/_internal/serve/engines/vllm/vllm_engine.py): this one streams the same paced events, one per token.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid

from ray.llm._internal.serve.core.configs.openai_api_models import ChatCompletionRequest, ChatCompletionResponse
from ray.llm._internal.serve.core.engine.protocol import LLMEngine
from ray.llm._internal.serve.core.server import llm_server
from ray.llm._internal.serve.utils.batcher import Batcher


class FirstFlushBatcher(Batcher):
    """Ray's Batcher, except that the first result leaves as soon as it is queued."""

    def __init__(self, generator, interval_ms=None):
        self.first_queued = asyncio.Event()
        super().__init__(generator, interval_ms=interval_ms)

    async def read(self):
        try:
            async for item in self.generator:
                self.queue.put_nowait(item)
                self.first_queued.set()
        finally:
            self.done_event.set()
            self.first_queued.set()

    async def stream(self):
        if self.interval_s not in (0, None):
            await self.first_queued.wait()
            first = self.drain_queue()
            if first:
                yield self._merge_results(first)
        async for batch in super().stream():
            yield batch


class PacedEngine(LLMEngine):
    def __init__(self, llm_config):
        self.llm_config = llm_config
        self.paced = dict(llm_config.experimental_configs["paced"])
        if self.paced.get("first_flush"):
            llm_server.Batcher = FirstFlushBatcher

    async def start(self):
        if self.llm_config.engine_kwargs.get("kv_transfer_config"):
            self.llm_config.setup_engine_backend()  # as VLLMEngine.start does: PD's orchestrator needs the backend

    def routing_stats(self) -> dict:
        return {}

    async def resolve_lora(self, lora_model):
        raise NotImplementedError

    async def reset_prefix_cache(self) -> None:
        return None

    async def check_health(self) -> None:
        return None

    async def chat(self, request, raw_request_info=None):
        params = request.kv_transfer_params or {}
        if params.get("do_remote_decode"):  # PD prefill: one non-streamed answer carrying the KV handle
            await asyncio.sleep(self.paced["prefill_ms"] / 1000)
            yield self._prefill_answer(request)
            return
        first_ms = self.paced["pull_ms"] if params.get("do_remote_prefill") else self.paced["prefill_ms"]
        await asyncio.sleep(first_ms / 1000)
        answer_id = f"chatcmpl-{uuid.uuid4().hex}"
        for index in range(request.max_tokens):
            if index:
                await asyncio.sleep(self.paced["step_ms"] / 1000)
            last = index == request.max_tokens - 1
            yield _event(answer_id, request.model, f"w{index} ", "length" if last else None)
        yield "data: [DONE]\n\n"

    def _prefill_answer(self, request):
        return ChatCompletionResponse.model_validate(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "w0"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 256, "completion_tokens": 1, "total_tokens": 257},
                "kv_transfer_params": {
                    "do_remote_prefill": True,
                    "do_remote_decode": False,
                    "remote_engine_id": "paced",
                    "remote_block_ids": [0],
                    "remote_host": "127.0.0.1",
                    "remote_port": 0,
                },
            }
        )

    async def build_asgi_app(self):
        from fastapi import FastAPI
        from fastapi.responses import StreamingResponse

        app = FastAPI()

        @app.post("/v1/chat/completions")  # FastAPI reads the annotation from this module's globals
        async def chat(body: ChatCompletionRequest):
            return StreamingResponse(self.chat(body), media_type="text/event-stream")

        return app

    async def completions(self, request, raw_request_info=None):
        raise NotImplementedError
        yield

    async def embeddings(self, request, raw_request_info=None):
        raise NotImplementedError
        yield

    async def transcriptions(self, request, raw_request_info=None):
        raise NotImplementedError
        yield


def _event(answer_id: str, model: str, text: str, finish: str | None) -> str:
    chunk = {
        "id": answer_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"
