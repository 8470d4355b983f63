"""A local OpenAI-compatible streaming server with injected latencies, for the benchmark's own tests,
its client-overhead calibration and the sample report. It is not a model: every response is the
word-level tokens ``w0 w1 w2 ...`` of the offline tokenizer (``offline_tokenizer.py``), one token per
streamed chunk, so the client's token count is exact.

Latency model, per request (``Delays``):

    TTFT = ttft_ms + ttft_ms_per_prompt_token * prompt_tokens + ttft_ms_per_inflight * (in-flight - 1)
    ITL  = itl_ms + itl_ms_per_inflight * (in-flight - 1)

Tokens are sent on an absolute schedule (first token at start + TTFT, token i at start + TTFT + i*ITL),
so event-loop jitter does not accumulate over a response. Each request's server-side timestamps are
kept in ``records`` so a test can compare what the client measured with what the server did.

Endpoints: POST /v1/chat/completions, POST /v1/completions, GET /v1/models. Requests for another model
get OpenAI's 404 ``model_not_found`` error.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Self

from aiohttp import web


@dataclass(frozen=True)
class Delays:
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    ttft_ms_per_prompt_token: float = 0.0
    ttft_ms_per_inflight: float = 0.0
    itl_ms_per_inflight: float = 0.0

    def ttft_s(self, prompt_tokens: int, inflight: int) -> float:
        return (
            self.ttft_ms + self.ttft_ms_per_prompt_token * prompt_tokens + self.ttft_ms_per_inflight * (inflight - 1)
        ) / 1000.0

    def itl_s(self, inflight: int) -> float:
        return (self.itl_ms + self.itl_ms_per_inflight * (inflight - 1)) / 1000.0


@dataclass
class RequestRecord:
    """Server-side view of one request (perf_counter seconds)."""

    received: float
    request_id: str | None
    prompt_tokens: int
    output_tokens: int
    inflight: int
    first_token: float | None = None
    last_token: float | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token is None else self.first_token - self.received

    @property
    def itl_s(self) -> float | None:
        if self.first_token is None or self.last_token is None or self.output_tokens < 2:
            return None
        return (self.last_token - self.first_token) / (self.output_tokens - 1)


@dataclass
class _State:
    inflight: int = 0
    records: list[RequestRecord] = field(default_factory=list)


def _prompt_tokens(body: dict) -> int:
    if "messages" in body:
        text = " ".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for message in body.get("messages", [])
            for part in (
                [message.get("content")] if isinstance(message.get("content"), str) else message.get("content") or []
            )
        )
    else:
        prompt = body.get("prompt", "")
        text = prompt if isinstance(prompt, str) else " ".join(map(str, prompt))
    return len(text.split())


class FakeOpenAIServer:
    """Runs in a background thread: ``with FakeOpenAIServer("m", Delays(100, 10)) as server: server.url``."""

    def __init__(
        self,
        model: str,
        delays: Delays = Delays(),
        host: str = "127.0.0.1",
        port: int = 0,
        default_max_tokens: int = 16,
    ):
        self.model = model
        self.delays = delays
        self.host = host
        self.port = port
        self.default_max_tokens = default_max_tokens
        self._state = _State()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def records(self) -> list[RequestRecord]:
        return list(self._state.records)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error
        if not self._ready.is_set():
            raise RuntimeError("fake OpenAI server did not start within 10 s")

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._start_site())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            if self._runner is not None:  # always, once _start_site succeeded (its first statement sets it)
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

    async def _start_site(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completion)
        app.router.add_post("/v1/completions", self._completion)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = self._runner.addresses[0][1]

    # -- handlers --------------------------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}]}
        )

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        received = time.perf_counter()
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "invalid JSON body", "invalid_request_error")
        if body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "model_not_found")
        chat = request.path.endswith("/chat/completions")
        n_out = int(body.get("max_completion_tokens") or body.get("max_tokens") or self.default_max_tokens)
        n_in = _prompt_tokens(body)
        state = self._state
        state.inflight += 1
        record = RequestRecord(
            received=received,
            request_id=request.headers.get("X-Request-ID"),
            prompt_tokens=n_in,
            output_tokens=n_out,
            inflight=state.inflight,
        )
        state.records.append(record)
        try:
            ttft = self.delays.ttft_s(n_in, record.inflight)
            itl = self.delays.itl_s(record.inflight)
            if body.get("stream"):
                return await self._stream(request, body, record, chat, n_in, n_out, ttft, itl)
            await _sleep_until(received + ttft + itl * (n_out - 1))
            record.first_token = record.last_token = time.perf_counter()
            text = " ".join(f"w{i}" for i in range(n_out))
            choice = (
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                if chat
                else {"index": 0, "text": text, "finish_reason": "length"}
            )
            return web.json_response(
                {
                    "id": "fake",
                    "object": "chat.completion" if chat else "text_completion",
                    "created": 0,
                    "model": self.model,
                    "choices": [choice],
                    "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
                }
            )
        finally:
            state.inflight -= 1

    async def _stream(self, request, body, record, chat, n_in, n_out, ttft, itl) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        kind = "chat.completion.chunk" if chat else "text_completion"

        def chunk(i: int | None, finish: str | None = None, usage: dict | None = None) -> bytes:
            if chat:
                delta = (
                    {}
                    if i is None
                    else ({"role": "assistant", "content": f"w{i}"} if i == 0 else {"content": f" w{i}"})
                )
                choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
            else:
                choices = [
                    {
                        "index": 0,
                        "text": "" if i is None else (f"w{i}" if i == 0 else f" w{i}"),
                        "finish_reason": finish,
                    }
                ]
            payload = {
                "id": "fake",
                "object": kind,
                "created": 0,
                "model": self.model,
                "choices": [] if usage is not None else choices,
            }
            if usage is not None:
                payload["usage"] = usage
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        for i in range(n_out):
            await _sleep_until(record.received + ttft + itl * i)
            # Stamped before the write: a client cannot see a token before the server hands it to the
            # socket, so client time - server time (calibration's overhead) is never negative.
            now = time.perf_counter()
            if i == 0:
                record.first_token = now
            record.last_token = now
            await response.write(chunk(i))
        await response.write(chunk(None, finish="length"))
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(
                chunk(None, usage={"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out})
            )
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}, status=status
    )
