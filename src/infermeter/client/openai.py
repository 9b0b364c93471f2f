"""Streaming client for OpenAI-compatible /v1/completions and /v1/chat/completions (SSE).

Every SSE event is timestamped on the run clock when the read that completed its `data:` line returns (draft
B.1.1); `submitted_at` is when the last byte of the request body was written (aiohttp's chunk-sent trace).  Each
request ends in exactly one RequestRecord, whatever goes wrong; nothing raises out of `send` except cancellation.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import orjson

from infermeter.client.sse import SSEError, SSEParser
from infermeter.records import RequestRecord, RunClock

Api = Literal["completions", "chat"]


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready to send: its prompt text and what the workload declared about it."""

    request_id: int
    prompt: str
    input_tokens: int
    max_tokens: int
    request_class: str = ""


@dataclass
class ClientConfig:
    base_url: str
    api: Api = "completions"
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    connect_timeout: float = 10.0
    first_token_timeout: float = 120.0
    total_timeout: float = 900.0
    ignore_eos: bool = True
    temperature: float = 0.0
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        path = "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        return self.base_url.rstrip("/") + path

    def declaration(self) -> dict[str, Any]:
        """What run.json says about the client (the API key itself never appears)."""
        return {
            "endpoint": self.endpoint,
            "api": self.api,
            "model": self.model,
            "api_key": f"from ${self.api_key_env}" if os.environ.get(self.api_key_env) else "none",
            "timeouts_s": {
                "connect": self.connect_timeout,
                "first_token": self.first_token_timeout,
                "total": self.total_timeout,
            },
            "ignore_eos": self.ignore_eos,
            "temperature": self.temperature,
        }


class _Failure(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class _Stream:
    """What one response stream has delivered so far."""

    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    content_started: bool = False
    usage_completion: int | None = None
    usage_prompt: int | None = None
    server_offsets: list[float] | None = None
    server_response_start: float | None = None  # server offset at which it sent the response headers
    headers_at: float | None = None  # run-clock time the client received the response headers
    done: bool = False
    cumulative: int | None = None  # continuous usage stats: completion tokens so far


class OpenAIClient:
    """One aiohttp session shared by every request of a run."""

    def __init__(self, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> None:
        self.config = config
        self.clock = clock
        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(self._sent)
        trace.on_request_chunk_sent.append(self._sent)
        self._connector = aiohttp.TCPConnector(limit=max_connections, ttl_dns_cache=300, force_close=False)
        self._session = aiohttp.ClientSession(
            connector=self._connector,
            trace_configs=[trace],
            timeout=aiohttp.ClientTimeout(
                total=None, connect=config.connect_timeout, sock_connect=config.connect_timeout
            ),
            json_serialize=lambda o: orjson.dumps(o).decode(),
        )
        key = os.environ.get(config.api_key_env)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self.counting = "server usage per event when given, else one token per content event"

    @staticmethod
    async def _sent(session: Any, ctx: Any, params: Any) -> None:
        holder = ctx.trace_request_ctx
        if holder is not None:
            holder["sent"] = time.perf_counter()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The shared session, for side requests to the same server (tokenize, models)."""
        return self._session

    async def close(self) -> None:
        await self._session.close()

    def body(self, req: PreparedRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": cfg.model,
            "max_tokens": req.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": cfg.temperature,
        }
        if cfg.api == "completions":
            body["prompt"] = req.prompt
        else:
            body["messages"] = [{"role": "user", "content": req.prompt}]
        if cfg.ignore_eos:
            body["ignore_eos"] = True
        body.update(cfg.extra_body)
        return body

    async def send(
        self,
        req: PreparedRequest,
        scheduled_at: float,
    ) -> RequestRecord:
        """Send one request and stream its reply into a record (status ok, error, timeout or cancelled).

        Cancelling the task ends the request with status "cancelled" and returns its record rather than raising.
        """
        rec = RequestRecord(
            request_id=req.request_id,
            request_class=req.request_class,
            input_tokens=req.input_tokens,
            max_tokens=req.max_tokens,
            scheduled_at=scheduled_at,
        )
        stream = _Stream()
        trace_ctx: dict[str, float] = {}
        payload = orjson.dumps(self.body(req))
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(self.config.first_token_timeout) as deadline:
                try:
                    async with self._session.post(
                        self.config.endpoint, data=payload, headers=self._headers, trace_request_ctx=trace_ctx
                    ) as resp:
                        stream.headers_at = self.clock.now()
                        rec.submitted_at = self.clock.at(trace_ctx.get("sent", time.perf_counter()))
                        if resp.status != 200:
                            text = (await resp.text(errors="replace"))[:300].replace("\n", " ")
                            raise _Failure("error", f"HTTP {resp.status}: {text}")
                        await self._read(resp, stream, deadline, started)
                except TimeoutError:
                    raise
                except aiohttp.ClientConnectorError as exc:
                    raise _Failure("error", f"cannot connect: {exc}") from None
                except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, ConnectionResetError) as exc:
                    raise _Failure("error", f"connection lost mid-stream: {type(exc).__name__}: {exc}") from None
                except aiohttp.ClientError as exc:
                    raise _Failure("error", f"{type(exc).__name__}: {exc}") from None
            if not stream.done:
                raise _Failure("error", "stream ended without [DONE]")
            rec.status = "ok"
        except _Failure as f:
            rec.status, rec.error = f.status, f.reason  # type: ignore[assignment]
        except TimeoutError:
            rec.status = "timeout"  # type: ignore[assignment]
            rec.error = (
                f"no content token within {self.config.first_token_timeout:g} s"
                if not stream.content_started
                else f"not finished within the total timeout of {self.config.total_timeout:g} s"
            )
            if not stream.chunk_times and "sent" not in trace_ctx:
                rec.error = f"no connection within {self.config.first_token_timeout:g} s"
        except asyncio.CancelledError:
            # the run is stopping: the request ends here, and its record (with what it received) is the result
            rec.status, rec.error = "cancelled", "cancelled before completion (run stopped)"  # type: ignore[assignment]
        self._fill(rec, stream, trace_ctx)
        return rec

    def _fill(self, rec: RequestRecord, stream: _Stream, trace_ctx: dict[str, float]) -> None:
        if rec.submitted_at == 0.0 and "sent" in trace_ctx:
            rec.submitted_at = self.clock.at(trace_ctx["sent"])
        rec.chunk_times = stream.chunk_times
        rec.chunk_tokens = stream.chunk_tokens
        rec.token_times = [t for t, k in zip(stream.chunk_times, stream.chunk_tokens, strict=True) for _ in range(k)]
        received = len(rec.token_times)
        anchor = rec.submitted_at
        if stream.server_response_start is not None and stream.headers_at is not None:
            # both sides saw the response headers leave/arrive: anchoring there cancels the request's upload time
            anchor = stream.headers_at - stream.server_response_start
        rec.output_tokens = stream.usage_completion if stream.usage_completion is not None else received
        if stream.usage_prompt is not None:
            rec.input_tokens = stream.usage_prompt
        if stream.server_offsets is not None and len(stream.server_offsets) == received:
            rec.server_token_times = [anchor + off for off in stream.server_offsets]

    async def _read(
        self,
        resp: aiohttp.ClientResponse,
        stream: _Stream,
        deadline: asyncio.Timeout,
        started: float,
    ) -> None:
        parser = SSEParser()
        chat = self.config.api == "chat"
        async for data in resp.content.iter_any():
            now = self.clock.now()
            for payload in parser.feed(data):
                if payload == b"[DONE]":
                    stream.done = True
                    continue
                try:
                    event = orjson.loads(payload)
                except orjson.JSONDecodeError:
                    raise _Failure("error", f"non-JSON event: {payload[:80]!r}") from None
                if not isinstance(event, dict):
                    raise _Failure("error", f"event is not a JSON object: {payload[:80]!r}")
                if "error" in event:
                    raise _Failure("error", f"server error event: {str(event['error'])[:200]}")
                was_started = stream.content_started
                self._event(event, now, stream, chat)
                if stream.content_started and not was_started:
                    deadline.reschedule(started + self.config.total_timeout)
            try:
                parser.check()
            except SSEError as exc:
                raise _Failure("error", str(exc)) from None
        if parser.pending.strip():
            raise _Failure("error", f"stream ended mid-line: {parser.pending[:80]!r}")

    @staticmethod
    def _event(event: dict[str, Any], now: float, stream: _Stream, chat: bool) -> None:
        usage = event.get("usage")
        extra = event.get("infermeter")
        if isinstance(extra, dict) and isinstance(extra.get("server_token_times"), list):
            stream.server_offsets = [float(x) for x in extra["server_token_times"]]
            start = extra.get("response_start")
            stream.server_response_start = float(start) if isinstance(start, int | float) else None
        delta_usage: int | None = None
        if isinstance(usage, dict):
            if isinstance(usage.get("completion_tokens"), int):
                total = usage["completion_tokens"]
                delta_usage = total - (stream.cumulative or 0)
                stream.cumulative = total
                stream.usage_completion = total
            if isinstance(usage.get("prompt_tokens"), int):
                stream.usage_prompt = usage["prompt_tokens"]
        choices = event.get("choices") or []
        if not choices:
            return
        choice = choices[0]
        if chat:
            delta = choice.get("delta") or {}
            text = delta.get("content") or delta.get("reasoning_content") or ""
        else:
            text = choice.get("text") or ""
        if not stream.content_started and not text.strip():
            # draft 5.1.3.1: empty, whitespace-only and role-only events before content are not the first token
            stream.chunk_times.append(now)
            stream.chunk_tokens.append(0)
            return
        if not text:
            return
        logprobs = choice.get("logprobs")
        if delta_usage is not None and delta_usage > 0:
            count = delta_usage
        elif isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list) and logprobs["tokens"]:
            count = len(logprobs["tokens"])
        else:
            count = 1
        stream.content_started = True
        stream.chunk_times.append(now)
        stream.chunk_tokens.append(count)
