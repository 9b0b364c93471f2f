"""The emulated server: the real-clock engine and a request's way through it, shared by its front ends (the aiohttp
routes of emulator/routes.py, the lean HTTP/1.1 front end of lean_http.py and gRPC): its prompt's tokens, its limits,
the prefix cache and the input guardrail, admission into the engine, and its account in the metrics once finished.

Prompts are counted with the tokenizer the configuration names (cl100k_base unless told otherwise; chat under its
template), which /v1/models declares.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
import uuid
from collections.abc import Callable
from typing import Any

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.direct_events import DirectEvents
from infermeter.emulator.engine_loop import Handle, RealClockEngine
from infermeter.emulator.faults import FaultPlan
from infermeter.emulator.media_cost import MediaCost
from infermeter.emulator.metrics import ServerMetrics
from infermeter.emulator.openai_format import bad_request, chat_tokens, object_name, prompt_tokens
from infermeter.emulator.prefix_cache import PrefixCache
from infermeter.emulator.tokenizer import EmulatorTokenizer


class Emulator:
    """The engine, its tokenizer, prefix cache, faults and metrics, and what every front end does with a request."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.tokenizer = EmulatorTokenizer(config.tokenizer)
        self.engine: RealClockEngine | None = None
        self.cache = (
            PrefixCache(config.engine.capacity() // config.engine.block_size, config.engine.block_size)
            if config.prefix_caching
            else None
        )
        self.faults = FaultPlan(config.faults, config.seed)
        self.metrics = ServerMetrics(config.model, config.metrics_dialect)
        self.media = MediaCost.of(config)
        # request ids: 16 hex digits as before, a random half per process and a counter (no urandom per request)
        self._id_base = uuid.uuid4().hex[:8]
        self._ids = itertools.count()

    def start(self) -> None:
        """Start the engine (on the running event loop) and export its live state."""
        # a full collection scans every object loaded (tiktoken, numpy, prometheus): tens of ms with every stream
        # stalled; what is alive now is frozen out of it and young collections run less often
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 50, 1000)
        self.engine = RealClockEngine(self.config)
        self.engine.start()
        self.metrics.watch(self.engine)

    async def stop(self) -> None:
        if self.engine is not None:
            await self.engine.stop()

    def request_tokens(self, body: dict[str, Any], chat: bool) -> list[int]:
        """A generation request's prompt tokens: the chat messages under the template, or the completions prompt."""
        return chat_tokens(body, self.tokenizer) if chat else prompt_tokens(body, self.tokenizer)

    def generation(self, body: dict[str, Any], prompt: int) -> tuple[int, int]:
        """A generation request's max_tokens and priority, or HTTP 400 saying what is wrong with them."""
        try:
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        except (TypeError, ValueError):
            raise bad_request("max_tokens must be an integer") from None
        if max_tokens < 1:
            raise bad_request("max_tokens must be at least 1")
        priority = body.get("priority", 0)  # vLLM's request priority: lower is served first
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise bad_request("priority must be an integer (lower is served first)")
        too_long = self.too_long(prompt, max_tokens)
        if too_long is not None:
            raise bad_request(too_long)
        return max_tokens, priority

    def new_id(self, chat: bool) -> str:
        """OpenAI's id format: `cmpl-`/`chatcmpl-` and 16 hex digits."""
        return self.request_id("chatcmpl-" if chat else "cmpl-")

    def request_id(self, prefix: str) -> str:
        """A reply's id: the API's prefix and 16 hex digits."""
        return f"{prefix}{self._id_base}{next(self._ids) & 0xFFFFFFFF:08x}"

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

    async def admit(self, tokens: list[int], max_tokens: int, priority: int = 0, media: int = 0) -> Handle | str:
        """Prefix-cache lookup, the input guardrail, then the engine: a handle, or why the engine refuses it.
        Shared by the HTTP and gRPC front ends.  `media`: the prefill tokens of the request's images and audio,
        prefilled after its text."""
        cached = self.cache_lookup(tokens)
        if self.config.input_filter_ms:
            await asyncio.sleep(self.config.input_filter_ms / 1000)
        return self.submit(tokens, max_tokens, cached, priority, media)

    async def prefill_only(self, prompts: list[int]) -> list[Handle] | str:
        """Embeddings and rerank: each input's prefill as its own engine request of one emission (batched and
        queued with everything else), past the input guardrail; the handles once every prefill is done, or why
        the engine refuses one.  The prefix cache is not consulted, as vLLM leaves it off for pooling models."""
        assert self.engine is not None
        for n in prompts:
            if (too_long := self.too_long(n, 1)) is not None:
                return too_long
        if self.config.input_filter_ms:
            await asyncio.sleep(self.config.input_filter_ms / 1000)
        handles: list[Handle] = []
        for n in prompts:
            handle = self.engine.submit(n, 1)
            if isinstance(handle, str):
                for h in handles:
                    self.engine.abandon(h)
                return handle
            self.metrics.prefilled(n)
            handles.append(handle)
        try:
            for handle in handles:
                await handle.queue.get()  # its one emission: the end of its prefill
        except asyncio.CancelledError:  # the client went away
            for h in handles:
                self.engine.abandon(h)
            raise
        return handles

    def cache_lookup(self, tokens: list[int]) -> int:
        """How many of the prompt's leading tokens the prefix cache holds (0 without one); the prompt goes in."""
        if self.cache is None:
            return 0
        cached = self.cache.lookup_and_insert(tokens)
        self.metrics.cache_lookup(len(tokens), cached)
        return cached

    def submit(self, tokens: list[int], max_tokens: int, cached: int, priority: int, media: int = 0) -> Handle | str:
        """The request into the engine (its prompt: the text's tokens and `media` more): its handle, or why the
        engine refuses it."""
        assert self.engine is not None
        prompt = len(tokens) + media
        handle = self.engine.submit(prompt, max_tokens, cached, priority=priority)
        if not isinstance(handle, str):
            self.metrics.prefilled(prompt - cached)
        return handle

    def direct_events(
        self, transport: asyncio.Transport, chunked: bool, rid: str, chat: bool, ended: Callable[[bool], None]
    ) -> DirectEvents:
        """A stream's events as the engine hands out its tokens, written straight to `transport`."""
        obj = object_name(chat, streamed=True)
        created = int(time.time())
        return DirectEvents(
            transport, chunked, rid, obj, created, self.config.model, chat, self.tokenizer.reply_json, ended
        )

    def account(self, times: list[float], received: float, handle: Handle) -> None:
        """A finished stream into the metrics (see ServerMetrics.account)."""
        self.metrics.account(times, received, handle)
