"""OpenAI-compatible HTTP server over the real-clock engine: /v1/completions, /v1/chat/completions, /v1/models,
/health, /tokenize and a Prometheus /metrics with vLLM's metric names.  Prompts are counted with the tokenizer the
configuration names (cl100k_base unless told otherwise; chat under its template), which /v1/models declares.

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
import gc
import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from infermeter import __version__
from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.engine_loop import LATE_S, Handle, RealClockEngine, offsets_from
from infermeter.emulator.faults import HTTP_MESSAGE, HTTP_STATUS, Fault, FaultPlan
from infermeter.emulator.guardrails import OutputFilter
from infermeter.emulator.prefix_cache import PrefixCache
from infermeter.emulator.tokenizer import EmulatorTokenizer

LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)


class _EngineGauges:
    """Collector for the engine's live state, read at scrape time."""

    def __init__(self, engine: RealClockEngine, model: str) -> None:
        self.engine = engine
        self.model = model

    def collect(self):  # type: ignore[no-untyped-def]
        labels = ["model_name"]
        for name, doc, value in (
            ("vllm:num_requests_running", "Requests in the running batch.", self.engine.running),
            ("vllm:num_requests_waiting", "Requests waiting to be scheduled.", self.engine.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage, 1 means 100 percent.", self.engine.core.memory.usage),
            (
                "infermeter:max_batch_size",
                "The most requests a step holds.",
                self.engine.config.engine.scheduler.max_batch(),
            ),
        ):
            g = GaugeMetricFamily(name, doc, labels=labels)
            g.add_metric([self.model], value)
            yield g
        late = self.engine.lateness
        h = HistogramMetricFamily(
            "infermeter:token_lateness_seconds",
            "How long after its scheduled time on the engine's timeline each token was handed out.",
            labels=labels,
        )
        cumulative = list(itertools.accumulate(late.counts))
        buckets = [(f"{b:g}", c) for b, c in zip(late.bounds, cumulative, strict=False)]
        h.add_metric([self.model], [*buckets, ("+Inf", late.tokens)], sum_value=late.total_s)
        yield h
        for name, doc, value in (
            ("infermeter:tokens_late", f"Tokens handed out over {LATE_S * 1e3:g} ms after their time.", late.late),
            ("infermeter:timeline_resets", "Steps whose timeline fell 50 ms behind the real clock.", late.resets),
        ):
            c = CounterMetricFamily(name, doc, labels=labels)
            c.add_metric([self.model], value)
            yield c


class _BatchHistogram:
    """A Prometheus histogram exported under the same name and buckets as prometheus_client's, for values observed
    per stream or per token: they are kept as they come and counted in one numpy pass per FOLD_AT of them or when
    scraped (no lock, no Python call per token; prometheus_client's observe took a lock and a bucket search each)."""

    FOLD_AT = 8192

    def __init__(self, name: str, doc: str, model: str) -> None:
        self.name, self.doc, self.model = name, doc, model
        self.bounds = np.asarray(LATENCY_BUCKETS)
        self.counts = np.zeros(len(LATENCY_BUCKETS) + 1, dtype=np.int64)
        self.sum = 0.0
        self._pending: list[float] = []

    def observe(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def observe_gaps(self, times: list[float]) -> None:
        """Observe the gaps between consecutive `times`."""
        self._pending += [b - a for a, b in itertools.pairwise(times)]
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        values = np.asarray(self._pending)
        self._pending = []
        self.counts += np.bincount(np.searchsorted(self.bounds, values), minlength=len(self.counts))
        self.sum += float(values.sum())

    def collect(self):  # type: ignore[no-untyped-def]
        self._fold()
        h = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        cumulative = np.cumsum(self.counts).tolist()
        buckets = [(f"{b}", c) for b, c in zip(LATENCY_BUCKETS, cumulative, strict=False)]
        h.add_metric([self.model], [*buckets, ("+Inf", cumulative[-1])], sum_value=self.sum)
        yield h


class Emulator:
    """The aiohttp application and everything it serves."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.tokenizer = EmulatorTokenizer(config.tokenizer)
        self.engine: RealClockEngine | None = None
        self.cache = (
            PrefixCache(config.engine.capacity() // config.engine.block_size, config.engine.block_size)
            if config.prefix_caching
            else None
        )
        self.rng = np.random.default_rng(config.seed)
        self.faults = FaultPlan(config.faults, config.seed)
        self.registry = CollectorRegistry()
        reg, m = self.registry, config.model

        def histogram(name: str, doc: str) -> _BatchHistogram:
            h = _BatchHistogram(name, doc, m)
            reg.register(h)
            return h

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, ["model_name"], registry=reg).labels(m)

        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token.")
        self.itl = histogram("vllm:inter_token_latency_seconds", "Inter-token latency.")
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency.")
        self.queue_time = histogram("vllm:request_queue_time_seconds", "Time in the waiting queue.")
        self.prefill_time = histogram("vllm:request_prefill_time_seconds", "Time from first scheduled to first token.")
        self.prefill_tokens = counter("vllm:prompt_tokens", "Prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Generation tokens processed.")
        self.requests_ok = counter("vllm:request_success", "Finished requests.")
        self.prefix_queries = counter("vllm:prefix_cache_queries", "Prefix-cache tokens queried.")
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix-cache tokens hit.")
        self.preemptions = counter("vllm:num_preemptions", "Preemptions (recompute).")
        # what vLLM does not export and the IETF draft's section 5.8.4 asks for, under the emulator's own names
        self.preempted_requests = counter("infermeter:preempted_requests", "Requests preempted at least once.")
        self.preempted_finished = counter("infermeter:preempted_requests_finished", "Preempted requests finished.")
        self.preempted_tokens = counter("infermeter:preempted_tokens", "KV tokens discarded by preemptions.")
        self._engine_counts_seen = (0, 0, 0)
        # request ids: 16 hex digits as before, a random half per process and a counter (no urandom per request)
        self._id_base = uuid.uuid4().hex[:8]
        self._ids = itertools.count()

    # ----- app wiring

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """With api_key set, /v1/ needs it; a wrong key is echoed back in the 401 body, as some servers do."""
        key = self.config.api_key
        if key is not None and request.path.startswith("/v1/"):
            given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
            if given != key:
                message = f"Incorrect API key provided: {given or '(none)'}. Check the key and try again."
                body = {"error": {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}}
                return web.json_response(body, status=401)
        return await handler(request)

    def app(self) -> web.Application:
        middlewares = [self._auth] if self.config.api_key is not None else []  # one coroutine less per request
        app = web.Application(client_max_size=64 * 1024**2, middlewares=middlewares)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_post("/tokenize", self.tokenize)
        app.on_startup.append(self._startup)
        app.on_cleanup.append(self._cleanup)
        return app

    async def _startup(self, app: web.Application) -> None:
        # a full collection scans every object loaded (tiktoken, numpy, prometheus): tens of ms with every stream
        # stalled; what is alive now is frozen out of it and young collections run less often
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 50, 1000)
        self.engine = RealClockEngine(self.config)
        self.engine.start()
        self.registry.register(_EngineGauges(self.engine, self.config.model))

    async def _cleanup(self, app: web.Application) -> None:
        if self.engine is not None:
            await self.engine.stop()

    # ----- simple endpoints

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(self, request: web.Request) -> web.Response:
        data = {
            "object": "list",
            "data": [
                {
                    "id": self.config.model,
                    "object": "model",
                    "owned_by": "infermeter",
                    "max_model_len": self.config.max_model_len,
                    "infermeter_version": __version__,
                    **self.tokenizer.declaration(),
                }
            ],
        }
        return web.json_response(data, dumps=lambda o: orjson.dumps(o).decode())

    async def metrics(self, request: web.Request) -> web.Response:
        assert self.engine is not None
        state = self.engine.core.state
        now = (state.preemptions, state.preempted_requests, state.preempted_tokens)
        counters = (self.preemptions, self.preempted_requests, self.preempted_tokens)
        for c, seen, value in zip(counters, self._engine_counts_seen, now, strict=True):
            if value > seen:
                c.inc(value - seen)
        self._engine_counts_seen = now
        return web.Response(body=generate_latest(self.registry), content_type="text/plain", charset="utf-8")

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's /tokenize: the prompt's (or the chat messages') tokens under the emulator's tokenizer."""
        body = await self._json(request)
        tokens = self._chat_tokens(body) if "messages" in body else self._prompt_tokens(body)
        return web.json_response({"count": len(tokens), "max_model_len": self.config.max_model_len, "tokens": tokens})

    # ----- generation

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        return await self._generate(request, body, self.request_tokens(body, chat=False), chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        return await self._generate(request, body, self.request_tokens(body, chat=True), chat=True)

    def request_tokens(self, body: dict[str, Any], chat: bool) -> list[int]:
        """A generation request's prompt tokens: the chat messages under the template, or the completions prompt."""
        return self._chat_tokens(body) if chat else self._prompt_tokens(body)

    def _prompt_tokens(self, body: dict[str, Any]) -> list[int]:
        """A completions prompt's tokens: text, or a list holding one text (pre-tokenized ids are taken as is)."""
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            if prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
                return list(prompt)
            prompt = prompt[0] if prompt and isinstance(prompt[0], str) else ""
        return self.tokenizer.completion(str(prompt))

    def _chat_tokens(self, body: dict[str, Any]) -> list[int]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _bad_request("'messages' must be a non-empty list")
        try:
            return self.tokenizer.chat(messages)
        except ValueError as exc:
            raise _bad_request(str(exc)) from None

    async def _json(self, request: web.Request) -> dict[str, Any]:
        return parse_body(await request.read())

    async def _generate(
        self, request: web.Request, body: dict[str, Any], tokens: list[int], chat: bool
    ) -> web.StreamResponse:
        assert self.engine is not None
        received = time.perf_counter()
        if self.config.strict_fields:
            unknown = sorted(set(body) - (CHAT_FIELDS if chat else COMPLETION_FIELDS))
            if unknown:
                return _unprocessable(unknown)
        max_tokens, priority = self.generation(body, len(tokens))
        fault = self.faults.draw()
        if fault is not None and fault.kind in HTTP_STATUS:
            return _http_fault(fault)
        if fault is not None and fault.kind == "reset_before_headers":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never reaches the client: the connection is gone
        handle = await self.admit(tokens, max_tokens, priority)
        if isinstance(handle, str):
            raise _bad_request(handle)
        rid = self.new_id(chat)
        if not body.get("stream", False):
            return await self._whole(handle, rid, chat, len(tokens), received)
        return await self._stream(request, body, handle, rid, chat, len(tokens), received, fault)

    def generation(self, body: dict[str, Any], prompt: int) -> tuple[int, int]:
        """A generation request's max_tokens and priority, or HTTP 400 saying what is wrong with them."""
        try:
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        except (TypeError, ValueError):
            raise _bad_request("max_tokens must be an integer") from None
        if max_tokens < 1:
            raise _bad_request("max_tokens must be at least 1")
        priority = body.get("priority", 0)  # vLLM's request priority: lower is served first
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise _bad_request("priority must be an integer (lower is served first)")
        too_long = self.too_long(prompt, max_tokens)
        if too_long is not None:
            raise _bad_request(too_long)
        return max_tokens, priority

    def new_id(self, chat: bool) -> str:
        """OpenAI's id format: `cmpl-`/`chatcmpl-` and 16 hex digits."""
        return f"{'chatcmpl' if chat else 'cmpl'}-{self._id_base}{next(self._ids) & 0xFFFFFFFF:08x}"

    @property
    def lean(self) -> bool:
        """Whether streams may be served by the lean front end (emulator/lean_http.py): nothing configured that
        changes a request's path (faults, guardrails, an API key)."""
        c = self.config
        return (
            not c.faults and c.api_key is None and not c.input_filter_ms and not c.output_filter_ms
            and not c.strict_fields
        )  # fmt: skip

    def too_long(self, prompt: int, max_tokens: int) -> str | None:
        """Why a request exceeds the model's context, or None."""
        limit = self.config.max_model_len
        if prompt + max_tokens > limit:
            return f"prompt ({prompt}) + max_tokens ({max_tokens}) exceeds max_model_len {limit}"
        return None

    async def admit(self, tokens: list[int], max_tokens: int, priority: int = 0) -> Handle | str:
        """Prefix-cache lookup, the input guardrail, then the engine: a handle, or why the engine refuses it.
        Shared by the HTTP and gRPC front ends."""
        cached = self.cache_lookup(tokens)
        if self.config.input_filter_ms:
            await asyncio.sleep(self.config.input_filter_ms / 1000)
        return self.submit(tokens, max_tokens, cached, priority)

    def cache_lookup(self, tokens: list[int]) -> int:
        """How many of the prompt's leading tokens the prefix cache holds (0 without one); the prompt goes in."""
        if self.cache is None:
            return 0
        cached = self.cache.lookup_and_insert(tokens)
        self.prefix_queries.inc(len(tokens))
        self.prefix_hits.inc(cached)
        return cached

    def submit(self, tokens: list[int], max_tokens: int, cached: int, priority: int) -> Handle | str:
        """The request into the engine: its handle, or why the engine refuses it."""
        assert self.engine is not None
        handle = self.engine.submit(len(tokens), max_tokens, cached, priority=priority)
        if not isinstance(handle, str):
            self.prefill_tokens.inc(len(tokens) - cached)
        return handle

    async def _whole(self, handle: Handle, rid: str, chat: bool, prompt: int, received: float) -> web.Response:
        """A non-streaming reply (faults other than HTTP errors and resets apply to streams only)."""
        times = []
        while (t := await handle.queue.get()) is not None:
            times.append(t)
        self.account(times, received, handle)
        text = "".join(self.tokenizer.reply(i) for i in range(len(times)))
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return web.json_response(
            {
                "id": rid,
                "object": object_name(chat, streamed=False),
                "model": self.config.model,
                "choices": [choice],
                "usage": _usage(prompt, len(times), handle.req.cached),
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
        assert self.engine is not None
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        if request.version >= (1, 1):
            resp.enable_chunked_encoding()  # what aiohttp would choose; said here so that resp.chunked tells
        await resp.prepare(request)
        headers_sent = time.perf_counter()
        guard = OutputFilter(self.config.output_filter_ms / 1000)
        kind = fault.kind if fault is not None else None
        if kind is None and not guard.delay_s and request.transport is not None:
            return await self._stream_direct(
                resp, request.transport, rid, chat, body, handle, prompt, received, headers_sent
            )
        created = int(time.time())
        model = self.config.model
        obj = object_name(chat, streamed=True)
        strike = fault.token_index(handle.req.output) if fault is not None else -1
        out = _Writer(resp, kind)
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
                piece = self.tokenizer.reply(k)
                choice: dict[str, Any] = {"index": 0, "finish_reason": None}
                choice.update({"delta": {"content": piece}} if chat else {"text": piece})
                await out.event({"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]})
                if k == strike and fault is not None and await self._mid_stream(fault, request, handle, out):
                    return resp
            self.account(times, received, handle)
            final = _final(rid, obj, created, model, chat, times, received, headers_sent, handle)
            if (body.get("stream_options") or {}).get("include_usage") and kind != "no_final_usage":
                final["usage"] = _usage(prompt, len(times), handle.req.cached)
            await out.event(final)
            if kind == "reset_before_done":
                _abort(request)
                return resp
            if kind != "no_done":
                await out.raw(b"data: [DONE]\n\n")
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abandon(handle)
            raise
        return resp

    def direct_events(
        self, transport: asyncio.Transport, chunked: bool, rid: str, chat: bool, ended: Callable[[bool], None]
    ) -> DirectEvents:
        """A stream's events as the engine hands out its tokens, written straight to `transport`."""
        obj = object_name(chat, streamed=True)
        created = int(time.time())
        return DirectEvents(
            transport, chunked, rid, obj, created, self.config.model, chat, self.tokenizer.reply_json, ended
        )

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
        assert self.engine is not None
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def ended(finished: bool) -> None:
            if not done.done():  # a handler cancelled meanwhile (its client went away) waits for nothing
                done.set_result(finished)

        events = self.direct_events(transport, resp.chunked, rid, chat, ended)
        events.start(handle)
        try:
            if not await done:
                raise ConnectionResetError("the client went away")
        except (ConnectionResetError, asyncio.CancelledError):
            self.engine.abandon(handle)
            raise
        self.account(events.times, received, handle)
        # the last events and the chunked terminator in one write (one send less per stream)
        with contextlib.suppress(ConnectionError):  # the client left while a full socket buffer drained
            await resp.write_eof(events.last(body, prompt, received, sent, handle))
        return resp

    async def _mid_stream(self, fault: Fault, request: web.Request, handle: Handle, out: _Writer) -> bool:
        """Strike a mid-stream fault after the current token; True when the stream ends here."""
        assert self.engine is not None
        if fault.kind == "stall_mid_stream":
            await asyncio.sleep(fault.stall_s)
            return False
        if fault.kind == "reset_mid_stream":
            self.engine.abandon(handle)
            _abort(request)
            return True
        if fault.kind == "invalid_json":
            await out.raw(b'data: {"choices": [{"text": " broken\n\n')
            return False
        if fault.kind == "line_without_data":
            await out.raw(b"this line has no data field\n\n")
            return False
        if fault.kind == "end_before_finish":
            self.engine.abandon(handle)
            return True
        if fault.kind == "error_event":
            self.engine.abandon(handle)
            error = {"message": "engine failure while decoding (injected fault)", "type": "server_error", "code": 500}
            await out.event({"error": error})
            await out.raw(b"data: [DONE]\n\n")
            return True
        return False

    def account(self, times: list[float], received: float, handle: Handle) -> None:
        """A finished stream into the histograms and counters vLLM exports (its queue and prefill phases: queued
        until first scheduled, then until the first token)."""
        if not times:
            return
        self.ttft.observe(times[0] - received)
        scheduled = handle.req.first_scheduled
        if scheduled >= 0:
            self.queue_time.observe(max(scheduled - handle.req.arrival, 0.0))
            self.prefill_time.observe(max(times[0] - scheduled, 0.0))
        self.itl.observe_gaps(times)
        self.e2e.observe(times[-1] - received)
        self.generation_tokens.inc(len(times))
        self.requests_ok.inc()
        if handle.req.preemptions:
            self.preempted_finished.inc()


class DirectEvents:
    """One stream's events written straight to its transport as the engine hands out tokens (chunked framing as
    aiohttp's writer would add it; the headers went before).  `ended` is called once: True after the last token,
    False when the client went away."""

    def __init__(
        self,
        transport: asyncio.Transport,
        chunked: bool,
        rid: str,
        obj: str,
        created: int,
        model: str,
        chat: bool,
        reply_json: Callable[[int], bytes],
        ended: Callable[[bool], None],
    ) -> None:
        self.transport, self.chunked, self.reply_json, self._ended = transport, chunked, reply_json, ended
        self.rid, self.obj, self.created, self.model, self.chat = rid, obj, created, model, chat
        self.times: list[float] = []
        self.over = False
        start = orjson.dumps({"id": rid, "object": obj, "created": created, "model": model})[:-1]
        self.head = b"data: " + start + b',"choices":[{"index":0,"finish_reason":null,'
        self.head += b'"delta":{"content":' if chat else b'"text":'
        self.tail = b"}}]}\n\n" if chat else b"}]}\n\n"
        self.role = self.head[: -len(b'"content":')] + b'"role":"assistant","content":""}}]}\n\n'

    def start(self, handle: Handle) -> None:
        """The chat role event, then the tokens as the engine hands them out (first those handed out already)."""
        if self.chat:
            self.write(self.role)
        handle.take_direct(self.token)

    def write(self, data: bytes) -> None:
        if self.transport.is_closing():
            self._end(False)
            return
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data) if self.chunked else data)

    def token(self, t: float | None) -> None:
        """The engine handed out a token at `t` (None: the stream's last came before)."""
        if t is None:
            self._end(True)
            return
        piece = self.reply_json(len(self.times))
        self.times.append(t)
        self.write(self.head + piece + self.tail)

    def last(self, body: dict[str, Any], prompt: int, received: float, sent: float, handle: Handle) -> bytes:
        """The stream's last events: the final one (finish_reason, the server's token times, usage when the request
        asked for it) and [DONE]."""
        times = self.times
        final = _final(self.rid, self.obj, self.created, self.model, self.chat, times, received, sent, handle)
        if (body.get("stream_options") or {}).get("include_usage"):
            final["usage"] = _usage(prompt, len(times), handle.req.cached)
        return b"data: " + orjson.dumps(final) + b"\n\ndata: [DONE]\n\n"

    def _end(self, finished: bool) -> None:
        if not self.over:
            self.over = True
            self._ended(finished)


def _final(
    rid: str,
    obj: str,
    created: int,
    model: str,
    chat: bool,
    times: list[float],
    received: float,
    headers_sent: float,
    handle: Handle,
) -> dict[str, Any]:
    """A stream's last event: finish_reason and the server's own token times (usage is added when asked for)."""
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "length", **({"delta": {}} if chat else {"text": ""})}],
        "infermeter": {
            "server_token_times": offsets_from(times, received),
            "response_start": round(headers_sent - received, 6),
            "cached_tokens": handle.req.cached,
        },
    }


class _Writer:
    """Writes SSE events, in the stream shape a fault asks for (CRLF, split into small writes, keep-alives)."""

    SPLIT = 7  # bytes per write for split_reads

    def __init__(self, resp: web.StreamResponse, kind: str | None) -> None:
        self.resp = resp
        self.kind = kind

    async def event(self, obj: dict[str, Any]) -> None:
        await self.raw(b"data: " + orjson.dumps(obj) + b"\n\n")
        if self.kind == "keep_alive":
            await self.raw(b": keep-alive\n\n")

    async def raw(self, data: bytes) -> None:
        if self.kind == "crlf":
            data = data.replace(b"\n", b"\r\n")
        if self.kind != "split_reads":
            await self.resp.write(data)
            return
        for i in range(0, len(data), self.SPLIT):
            await self.resp.write(data[i : i + self.SPLIT])
            await asyncio.sleep(0.0005)  # let each piece leave as its own segment


def _abort(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()


def _http_fault(fault: Fault) -> web.Response:
    status = HTTP_STATUS[fault.kind]
    headers = {"Retry-After": f"{fault.retry_after_s:g}"} if fault.retry_after_s is not None else None
    kind = "rate_limit_error" if status == 429 else "server_error"
    body = {"error": {"message": HTTP_MESSAGE[status], "type": kind, "code": status}}
    return web.json_response(body, status=status, headers=headers)


def _usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    """OpenAI usage; prompt_tokens_details only when some prompt tokens were cached, as vLLM leaves it out at 0."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def object_name(chat: bool, streamed: bool) -> str:
    """A reply's OpenAI `object`: a chat completion (each event of its stream a chunk) or a text completion."""
    if not chat:
        return "text_completion"
    return "chat.completion.chunk" if streamed else "chat.completion"


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request's JSON object, or HTTP 400 saying it is not one."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _bad_request("request body is not JSON") from None
    if not isinstance(body, dict):
        raise _bad_request("request body must be a JSON object")
    return body


def error_body(message: str) -> bytes:
    """An HTTP 400's JSON body, in OpenAI's error format."""
    return orjson.dumps({"error": {"message": message, "type": "invalid_request_error", "code": 400}})


# the request fields of OpenAI's API reference (completions and chat completions)
_COMMON_FIELDS = frozenset(
    {"model", "frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n", "presence_penalty", "seed", "stop",
     "stream", "stream_options", "temperature", "top_p", "user"}
)  # fmt: skip
COMPLETION_FIELDS = _COMMON_FIELDS | {"prompt", "best_of", "echo", "suffix"}
CHAT_FIELDS = _COMMON_FIELDS | {
    "messages", "max_completion_tokens", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
    "response_format", "modalities", "audio", "metadata", "store", "reasoning_effort", "service_tier", "prediction",
}  # fmt: skip


def _unprocessable(fields: list[str]) -> web.Response:
    """HTTP 422 as a pydantic-validated server (FastAPI, `transformers serve`) answers an unknown field."""
    detail = [{"type": "extra_forbidden", "loc": ["body", f], "msg": "Extra inputs are not permitted"} for f in fields]
    return web.json_response({"detail": detail}, status=422)


def _bad_request(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(text=error_body(message).decode(), content_type="application/json")
