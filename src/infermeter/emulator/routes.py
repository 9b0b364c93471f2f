"""The emulator's aiohttp routes: /v1/completions, /v1/chat/completions (images and audio charged as prefill,
emulator/media_cost.py), /v1/models, /health, /tokenize and the Prometheus /metrics (emulator/metrics.py); the
Responses API, embeddings, rerank and the engines' native APIs are added from emulator/api_routes.py.

Every emitted token is one SSE event.  The final event carries usage (with vLLM's prompt_tokens_details when the
prefix cache served part of the prompt) and, under "infermeter", the server's own emission time of each token as
seconds after the request arrived (infermeter's ITL option C).  Configured faults (emulator/faults.py) are injected
per request; with `api_key` set, requests without it get HTTP 401 echoing the key they presented, as some hosted
APIs do.  Without faults, guardrails or a key, streams are served by the lean front end (lean_http.py) and the rest
by this aiohttp application.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson
from aiohttp import web

from infermeter import __version__
from infermeter.emulator.api_routes import ApiRoutes, guarded
from infermeter.emulator.engine_loop import Handle
from infermeter.emulator.fault_replies import (
    ERROR_MESSAGE,
    FaultWriter,
    StreamBreaks,
    abort,
    refused_by_fault,
    strike_mid_stream,
)
from infermeter.emulator.faults import Fault
from infermeter.emulator.guardrails import OutputFilter
from infermeter.emulator.media_cost import media_tokens
from infermeter.emulator.metrics_dialects import exposition
from infermeter.emulator.openai_format import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    bad_request,
    chat_tokens,
    final_event,
    object_name,
    parse_body,
    prompt_tokens,
    unprocessable,
    usage,
)
from infermeter.emulator.server import Emulator


def application(emulator: Emulator) -> web.Application:
    """The aiohttp application serving an emulator."""
    return HttpRoutes(emulator).app()


# how an OpenAI stream breaks under a fault: a cut-off JSON line, an error event, then [DONE]
OPENAI_BREAKS = StreamBreaks(
    b'data: {"choices": [{"text": " broken\n\n',
    b"data: " + orjson.dumps({"error": {"message": ERROR_MESSAGE, "type": "server_error", "code": 500}}) + b"\n\n",
    b"data: [DONE]\n\n",
)


class HttpRoutes:
    """Each route's handler, over the emulator it serves."""

    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """With api_key set, the API routes need it; a wrong key is echoed back in the 401 body, as some servers do."""
        key = self.emulator.config.api_key
        if key is not None and guarded(request.path):
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if given != key:
                message = f"Incorrect API key provided: {given or '(none)'}. Check the key and try again."
                body = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
                return web.json_response(body, status=401)
        return await handler(request)

    def app(self) -> web.Application:
        """The aiohttp application serving these routes."""
        keyed = self.emulator.config.api_key is not None
        middlewares = [self._auth] if keyed else []  # one coroutine less per request
        app = web.Application(client_max_size=64 * 1024**2, middlewares=middlewares)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/tokenize", self.tokenize)
        ApiRoutes(self.emulator).add_to(app)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, app: web.Application) -> None:
        self.emulator.start()

    async def _cleanup(self, app: web.Application) -> None:
        await self.emulator.stop()

    # ----- simple endpoints

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(self, request: web.Request) -> web.Response:
        data = {
            "object": "list",
            "data": [
                {
                    "id": self.emulator.config.model,
                    "object": "model",
                    "owned_by": "infermeter",
                    "max_model_len": self.emulator.config.max_model_len,
                    "infermeter_version": __version__,
                    **self.emulator.tokenizer.declaration(),
                    **self.emulator.media.declaration(),
                    "embedding_dim": self.emulator.config.embedding_dim,
                    "metrics_dialect": self.emulator.config.metrics_dialect,
                }
            ],
        }
        return web.json_response(data, dumps=lambda o: orjson.dumps(o).decode())

    async def metrics(self, request: web.Request) -> web.Response:
        assert self.emulator.engine is not None
        text = exposition(self.emulator.metrics, self.emulator.engine)
        return web.Response(body=text, content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's /tokenize: the prompt's (or the chat messages') tokens under the emulator's tokenizer."""
        body = await self._json(request)
        tokenizer = self.emulator.tokenizer
        tokens = chat_tokens(body, tokenizer) if "messages" in body else prompt_tokens(body, tokenizer)
        limit = self.emulator.config.max_model_len
        return web.json_response({"count": len(tokens), "max_model_len": limit, "tokens": tokens})

    # ----- generation

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        return await self._generate(request, body, self.emulator.request_tokens(body, chat=False), chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        tokens = self.emulator.request_tokens(body, chat=True)
        media = media_tokens(body["messages"], self.emulator.media)
        return await self._generate(request, body, tokens, chat=True, media=media)

    async def _json(self, request: web.Request) -> dict[str, Any]:
        return parse_body(await request.read())

    async def _generate(
        self, request: web.Request, body: dict[str, Any], tokens: list[int], chat: bool, media: int = 0
    ) -> web.StreamResponse:
        """A completion or chat reply; `media`: the prefill tokens of the request's images and audio."""
        assert self.emulator.engine is not None
        received = time.perf_counter()
        if self.emulator.config.strict_fields:
            unknown = sorted(set(body) - (CHAT_FIELDS if chat else COMPLETION_FIELDS))
            if unknown:
                return unprocessable(unknown)
        prompt = len(tokens) + media
        max_tokens, priority = self.emulator.generation(body, prompt)
        fault = self.emulator.faults.draw()
        refused = refused_by_fault(fault, request)
        if refused is not None:
            self.emulator.metrics.failed()
            return refused
        handle = await self.emulator.admit(tokens, max_tokens, priority, media)
        if isinstance(handle, str):
            raise bad_request(handle)
        rid = self.emulator.new_id(chat)
        if not body.get("stream", False):
            return await self._whole(handle, rid, chat, prompt, received)
        return await self._stream(request, body, handle, rid, chat, prompt, received, fault)

    async def _whole(self, handle: Handle, rid: str, chat: bool, prompt: int, received: float) -> web.Response:
        """A non-streaming reply (faults other than HTTP errors and resets apply to streams only)."""
        times = []
        while (t := await handle.queue.get()) is not None:
            times.append(t)
        self.emulator.account(times, received, handle)
        text = "".join(self.emulator.tokenizer.reply(i) for i in range(len(times)))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return web.json_response(
            {
                "id": rid,
                "object": object_name(chat, streamed=False),
                "model": self.emulator.config.model,
                "choices": [choice],
                "usage": usage(prompt, len(times), handle.req.cached),
            }
        )

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        handle: Handle,
        rid: str,
        chat: bool,
        prompt: int,
        received: float,
        fault: Fault | None,
    ) -> web.StreamResponse:
        assert self.emulator.engine is not None
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        if request.version >= (1, 1):
            resp.enable_chunked_encoding()  # what aiohttp would choose; said here so that resp.chunked tells
        await resp.prepare(request)
        headers_sent = time.perf_counter()
        guard = OutputFilter(self.emulator.config.output_filter_ms / 1000)
        kind = fault.kind if fault is not None else None
        if kind is None and not guard.delay_s and request.transport is not None:
            return await self._stream_direct(
                resp, request.transport, rid, chat, body, handle, prompt, received, headers_sent
            )
        created = int(time.time())
        model = self.emulator.config.model
        obj = object_name(chat, streamed=True)
        strike = fault.token_index(handle.req.output) if fault is not None else -1
        out = FaultWriter(resp, kind)
        times: list[float] = []
        try:
            if kind == "keep_alive":
                await out.raw(b": keep-alive\n\n")
            if chat:
                role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                await out.event({"id": rid, "object": obj, "created": created, "model": model, "choices": [role]})
            if kind == "stall_before_first_token" and fault is not None:
                await asyncio.sleep(fault.stall_s)
            while (t := await handle.queue.get()) is not None:
                k = len(times)
                times.append(t)
                await guard.hold(t)
                piece = self.emulator.tokenizer.reply(k)
                choice: dict[str, Any] = {"index": 0, "finish_reason": None}
                choice.update({"delta": {"content": piece}} if chat else {"text": piece})
                await out.event({"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]})
                engine = self.emulator.engine
                if (
                    k == strike
                    and fault is not None
                    and await strike_mid_stream(engine, fault, request, handle, out, OPENAI_BREAKS)
                ):
                    return resp
            self.emulator.account(times, received, handle)
            final = final_event(rid, obj, created, model, chat, times, received, headers_sent, handle)
            if (body.get("stream_options") or {}).get("include_usage") and kind != "no_final_usage":
                final["usage"] = usage(prompt, len(times), handle.req.cached)
            await out.event(final)
            if kind == "reset_before_done":
                abort(request)
                return resp
            if kind != "no_done":
                await out.raw(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            self.emulator.engine.abandon(handle)
            raise
        return resp

    async def _stream_direct(
        self,
        resp: web.StreamResponse,
        transport: asyncio.Transport,
        rid: str,
        chat: bool,
        body: dict[str, Any],
        handle: Handle,
        prompt: int,
        received: float,
        sent: float,
    ) -> web.StreamResponse:
        """A stream without faults or an output filter: the engine writes each token's event itself (no task wakes
        per token, which is what lets one core serve thousands of streams); this waits for the last."""
        assert self.emulator.engine is not None
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def ended(finished: bool) -> None:
            if not done.done():  # a handler cancelled meanwhile (its client went away) waits for nothing
                done.set_result(finished)

        events = self.emulator.direct_events(transport, resp.chunked, rid, chat, ended)
        events.start(handle)
        try:
            if not await done:
                raise ConnectionResetError("the client went away")
        except (ConnectionResetError, asyncio.CancelledError):
            self.emulator.engine.abandon(handle)
            raise
        self.emulator.account(events.times, received, handle)
        # the last events and the chunked terminator in one write (one send less per stream)
        with contextlib.suppress(ConnectionError):  # the client left while a full socket buffer drained
            await resp.write_eof(events.last(body, prompt, received, sent, handle))
        return resp
