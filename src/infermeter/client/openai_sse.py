"""Streaming client for OpenAI-compatible /v1/completions and /v1/chat/completions (SSE).

Every SSE event is timestamped on the run clock when the read that completed its `data:` line returns (draft
B.1.1), stamped inside the event loop's read callback (`client.http1`); `submitted_at` is when the request's last
byte left the process (the socket took it).  Each
request ends in exactly one RequestRecord, whatever goes wrong, its error naming a reason from `client.reasons`.
Nothing raises out of `send` except cancellation, which propagates (as asyncio requires) after the record passed
in has been completed with status "cancelled".
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import aiohttp
import orjson

from infermeter import secrets
from infermeter.client import reasons
from infermeter.client.events import StreamDecoder, StreamFailure, StreamState
from infermeter.client.headers import key_source, merged, request_heads
from infermeter.client.http1 import Connection, ConnectionEnded, Head, Outgoing, Pool, ProtocolError
from infermeter.client.server_tokenizer import ServerTokenizer
from infermeter.client.urls import endpoint
from infermeter.errors import UserError
from infermeter.records import RequestRecord, RunClock, Status, failure
from infermeter.run_info import Client, Timeouts

Api = Literal["completions", "chat"]


class Message(NamedTuple):
    """One message of a chat conversation as the request body carries it."""

    role: Literal["system", "user", "assistant"]
    content: str


ERROR_BODY_BYTES = 65536  # read at most this much of an HTTP error response


@dataclass(frozen=True)
class PreparedRequest:
    """A request ready to send: its prompt text and what the workload declared about it."""

    request_id: int
    prompt: str
    input_tokens: int
    max_tokens: int
    request_class: str = ""
    ref_input_tokens: int | None = None  # the prompt's exact length under the run's declared tokenizer
    # a chat conversation sent instead of `prompt` alone (a multi-turn session's history, then its turn)
    messages: tuple[Message, ...] | None = None
    session_id: int | None = None  # a multi-turn session's index in the run, and this turn's index in it
    turn: int | None = None
    model: str | None = None  # the model or adapter this request names instead of the run's (--model-mix)
    # told the reply's whole text when its stream ends well (a session's next turn carries it as history)
    on_reply: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def record(self, scheduled_at: float) -> RequestRecord:
        """An empty record for this request, to be filled by `OpenAIClient.send`."""
        return RequestRecord(
            request_id=self.request_id,
            request_class=self.request_class,
            input_tokens=self.input_tokens,
            max_tokens=self.max_tokens,
            scheduled_at=scheduled_at,
            ref_input_tokens=self.ref_input_tokens,
            session_id=self.session_id,
            turn=self.turn,
            model=self.model,
        )


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
    # counts a reply's whole text under the run's declared tokenizer when its stream ends (ref_output_tokens)
    count_text: Callable[[str], int] | None = field(default=None, repr=False, compare=False)
    # --header's (name, value) pairs, ${VAR}s read already (client.headers); an Authorization replaces the key's
    extra_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    request_id_prefix: str | None = None  # every request carries X-Request-Id: <prefix>-<request id>

    @property
    def endpoint(self) -> str:
        path = "/v1/completions" if self.api == "completions" else "/v1/chat/completions"
        return endpoint(self.base_url, path)

    def api_key(self) -> str | None:
        """The key from the environment (registered for redaction the moment it is read)."""
        key = os.environ.get(self.api_key_env) or None
        secrets.register(key)
        return key

    def headers(self) -> dict[str, str]:
        """Headers for every request to the server, the key's Authorization (or --header's) among them."""
        return merged(self.extra_headers, self.api_key)

    def rejected_field(self, status: int, body: bytes | bytearray) -> str:
        """A 400/422 whose body names a field this client sent beyond the OpenAI schema: which option sends it
        (servers such as `transformers serve` answer 422 to any field they do not know); else ''."""
        if status not in (400, 422):
            return ""
        text = bytes(body).decode("utf-8", "replace")
        if self.ignore_eos and "ignore_eos" in text:
            return f"{reasons.REJECTED_FIELD} ignore_eos (sent to run replies to max_tokens): add --no-ignore-eos"
        for key in self.extra_body:
            if key in text:
                return f"{reasons.REJECTED_FIELD} {key}: leave it out of --extra-body"
        return ""

    def declaration(self) -> Client:
        """What run.json says about the client (the API key itself never appears)."""
        return Client(
            endpoint=secrets.redact_url(self.endpoint),
            api=self.api,
            model=self.model,
            api_key=key_source(self.extra_headers, self.api_key_env, self.api_key()),
            timeouts_s=Timeouts(
                connect=self.connect_timeout, first_token=self.first_token_timeout, total=self.total_timeout
            ),
            ignore_eos=self.ignore_eos,
            temperature=self.temperature,
            extra_body=secrets.redact_deep(self.extra_body),
        )


class _Failure(Exception):
    def __init__(self, status: Status, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.error = failure(reason, detail)


# A kept-alive connection the server closed after its last reply (llama.cpp's server does, without saying so) fails
# the next request: its write lands in a socket the server no longer reads and the connection ends before any
# response byte.  Such a request never reached the server, so it is sent again on another connection.  A failure
# after any response byte, or on a fresh connection, is the request's outcome.
STALE_RETRIES = 4
STALE_DETAIL = f"the request could not be delivered on any of {STALE_RETRIES + 1} connections (closed by the server)"


class _Stale(Exception):
    """The request never reached the server: the connection had been closed by the server."""


class _Reply:
    """One reply as its reads arrive (called from the event loop's read callback): the head, then SSE bytes into
    the decoder with the time each read returned; an error reply's body is kept (up to ERROR_BODY_BYTES).
    `deadline` is None until the request's task holds it (a request written by `start`, before its task ran)."""

    __slots__ = ("clock", "deadline", "decoder", "done", "error_body", "head", "total_at")

    def __init__(
        self, clock: RunClock, decoder: StreamDecoder, deadline: asyncio.Timeout | None, total_at: float
    ) -> None:
        self.clock, self.decoder, self.deadline, self.total_at = clock, decoder, deadline, total_at
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.head: Head | None = None
        self.error_body = bytearray()

    def on_head(self, head: Head, now: float) -> None:
        self.head = head
        self.decoder.state.headers_at = self.clock.at(now)

    def on_body(self, data: bytes, now: float) -> None:
        assert self.head is not None
        if self.head.status != 200:
            self.error_body += data[: ERROR_BODY_BYTES - len(self.error_body)]
            if len(self.error_body) >= ERROR_BODY_BYTES and not self.done.done():
                self.done.set_result(None)  # enough to say what went wrong; the connection is dropped
            return
        if self.decoder.feed(data, self.clock.at(now)) and self.deadline is not None:
            self.deadline.reschedule(self.total_at)

    def on_end(self, error: BaseException | None) -> None:
        if self.done.done():
            return
        if error is None:
            self.done.set_result(None)
        else:
            self.done.set_exception(error)


@dataclass
class _Written:
    """A request `start` wrote at once on an idle connection; its task reads the reply."""

    conn: Connection
    reply: _Reply
    out: Outgoing
    decoder: StreamDecoder
    payload: bytes
    started: float  # loop.time() when it was written


class OpenAIClient:
    """One aiohttp session shared by every request of a run."""

    def __init__(self, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> None:
        self.config = config
        self.clock = clock
        try:
            self._pool = Pool(config.endpoint, config.connect_timeout, max_connections)  # through a proxy if set
        except ValueError as exc:
            raise UserError(f"--url {config.base_url}: {exc}") from None
        self._headers = config.headers()
        self._request_head, self._id_head = request_heads(self._pool, self._headers, config.request_id_prefix)
        self._session: aiohttp.ClientSession | None = None  # side requests only (the server's tokenizer)
        self.counting = "server usage per event when given, else one token per content event"
        self._tokenizer: ServerTokenizer | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """An aiohttp session for side requests to the same server (tokenize, models), opened when first asked."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout),
                json_serialize=lambda o: orjson.dumps(o).decode(),
                trust_env=self._pool.proxy is not None,  # the proxy the pool uses (aiohttp reads the same variables)
            )
        return self._session

    @property
    def headers(self) -> dict[str, str]:
        """The request headers, for side requests that need the same credentials."""
        return dict(self._headers)

    async def close(self) -> None:
        await self._pool.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def declaration(self) -> Client:
        transport = "HTTP/1.1 + SSE" + self._pool.via()
        return self.config.declaration().model_copy(update={"backend": "openai", "transport": transport})

    async def server_token_count(self, text: str) -> int | None:
        if self._tokenizer is None:
            self._tokenizer = ServerTokenizer(self.config.base_url, self.config.model, self._headers)
        return await self._tokenizer.count(self.session, text)

    @property
    def token_count_source(self) -> str:
        return self._tokenizer.description if self._tokenizer is not None else "none offered"

    def body(self, req: PreparedRequest) -> dict[str, Any]:
        cfg = self.config
        body: dict[str, Any] = {
            "model": req.model or cfg.model,
            "max_tokens": req.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": cfg.temperature,
        }
        if cfg.api == "completions":
            body["prompt"] = req.prompt
        elif req.messages is not None:
            body["messages"] = [{"role": m.role, "content": m.content} for m in req.messages]
        else:
            body["messages"] = [{"role": "user", "content": req.prompt}]
        if cfg.ignore_eos:
            body["ignore_eos"] = True
        body.update(cfg.extra_body)
        return body

    def pace(self, poll: Callable[[], None] | None) -> None:
        self._pool.after_read = poll

    def start(
        self, req: PreparedRequest, scheduled_at: float, record: RequestRecord
    ) -> Coroutine[Any, Any, RequestRecord]:
        """Write the request now when a kept-alive connection is idle, without waiting for the event loop's next
        turn; the coroutine returned reads the reply (it is `send` when no connection is idle)."""
        try:  # first: a body that cannot be encoded must not take a connection
            payload = orjson.dumps(self.body(req))
        except TypeError:  # orjson.JSONEncodeError: `send` records why
            return self.send(req, scheduled_at, record)
        conn = self._pool.take_idle()
        if conn is None:
            return self.send(req, scheduled_at, record)
        decoder = self._decoder(req)
        started = asyncio.get_running_loop().time()
        reply = _Reply(self.clock, decoder, None, started + self.config.total_timeout)
        out = conn.send(self._request(payload, req.request_id), reply)
        return self._send(req, scheduled_at, record, _Written(conn, reply, out, decoder, payload, started))

    async def send(
        self,
        req: PreparedRequest,
        scheduled_at: float,
        record: RequestRecord | None = None,
    ) -> RequestRecord:
        """Send one request and stream its reply into a record (status ok, error, timeout or cancelled).

        Pass `record` (from `req.record(scheduled_at)`) to keep hold of it across a cancellation: it is completed
        with status "cancelled" before the CancelledError propagates.
        """
        return await self._send(req, scheduled_at, record if record is not None else req.record(scheduled_at), None)

    def _decoder(self, req: PreparedRequest) -> StreamDecoder:
        keep_text = self.config.count_text is not None or req.on_reply is not None
        return StreamDecoder(chat=self.config.api == "chat", keep_text=keep_text)

    def _request(self, payload: bytes, request_id: int) -> bytes:
        if self._id_head is None:
            return self._request_head + b"%d\r\n\r\n" % len(payload) + payload
        return self._id_head + b"%d\r\nContent-Length: %d\r\n\r\n" % (request_id, len(payload)) + payload

    async def _send(
        self, req: PreparedRequest, scheduled_at: float, rec: RequestRecord, written: _Written | None
    ) -> RequestRecord:
        cfg = self.config
        loop = asyncio.get_running_loop()
        if written is None:
            try:
                payload = orjson.dumps(self.body(req))
            except TypeError as exc:  # orjson.JSONEncodeError: e.g. a prompt holding a lone surrogate
                detail = f"the request body cannot be encoded as JSON ({exc}): it was not sent"
                rec.status, rec.error = "error", failure(reasons.CLIENT_ERROR, detail)
                return rec
            decoder, started = self._decoder(req), loop.time()
        else:
            decoder, payload, started = written.decoder, written.payload, written.started
        trace_ctx: dict[str, float] = {}
        try:
            try:
                async with asyncio.timeout_at(started + min(cfg.first_token_timeout, cfg.total_timeout)) as deadline:
                    try:
                        await self._exchange(payload, rec, decoder, trace_ctx, deadline, started, written)
                    except _Stale:
                        await self._resend(payload, rec, decoder, trace_ctx, deadline, started)
                rec.status = "ok"
            except TimeoutError:
                raise self._timed_out(decoder.state, trace_ctx, loop.time() - started) from None
            except StreamFailure as exc:
                raise _Failure("error", exc.reason, exc.detail) from None
        except _Failure as f:
            rec.status, rec.error = f.status, secrets.redact(f.error)
        except asyncio.CancelledError:
            rec.status, rec.error = "cancelled", failure(reasons.CANCELLED, "the run stopped before it finished")
            self._fill(rec, decoder.state, trace_ctx)
            raise
        self._fill(rec, decoder.state, trace_ctx)
        if req.on_reply is not None and rec.status == "ok":
            req.on_reply("".join(decoder.state.text))
        return rec

    async def _exchange(
        self,
        payload: bytes,
        rec: RequestRecord,
        decoder: StreamDecoder,
        trace_ctx: dict[str, float],
        deadline: asyncio.Timeout,
        started: float,
        written: _Written | None = None,
    ) -> None:
        """Send the request (unless `start` wrote it) and read the whole stream; failures become `_Failure`,
        `StreamFailure` or `_Stale`."""
        state = decoder.state
        if written is not None:
            conn, reply, out = written.conn, written.reply, written.out
            reply.deadline = deadline
            if state.content_started:
                deadline.reschedule(reply.total_at)
        else:
            conn = await self._connection()
            reply = _Reply(self.clock, decoder, deadline, started + self.config.total_timeout)
        try:
            if written is not None or conn.requests:
                trace_ctx["reused"] = 1.0
            if written is None:
                out = conn.send(self._request(payload, rec.request_id), reply)
            await out.drained()
            if out.at is not None:
                trace_ctx["sent"] = out.at
                rec.submitted_at = self.clock.at(out.at)
            try:
                await reply.done
            except ConnectionEnded as exc:
                if not exc.responded and "reused" in trace_ctx:
                    raise _Stale from None
                if decoder.closed_complete():
                    return  # a complete reply ([DONE] or a final chunk): how the connection ended does not matter
                if reply.head is None:
                    raise _Failure("error", reasons.CLOSED_BEFORE_RESPONSE, str(exc)) from None
                received = f"after {state.tokens} tokens" + (", usage received" if state.usage_completion else "")
                raise _Failure("error", reasons.LOST_MID_STREAM, f"{received} ({exc})") from None
            except ProtocolError as exc:
                raise _Failure("error", reasons.MALFORMED_HTTP, str(exc)) from None
            assert reply.head is not None
            if reply.head.status != 200:
                detail = _error_detail(reply.head, reply.error_body)
                hint = self.config.rejected_field(reply.head.status, reply.error_body)
                raise _Failure("error", reasons.http(reply.head.status), f"{detail} ({hint})" if hint else detail)
            decoder.end()
        finally:
            if not reply.done.done():
                reply.done.cancel()
            elif not reply.done.cancelled():
                reply.done.exception()  # retrieved: a failure already turned into this request's outcome
            self._pool.release(conn, reply)

    async def _connection(self) -> Connection:
        """A connection from the pool; failing to get one is the request's `_Failure`."""
        try:
            return await self._pool.acquire()
        except TimeoutError:
            detail = f"no connection within {self.config.connect_timeout:g} s"
            raise _Failure("error", reasons.CONNECT_TIMEOUT, detail) from None
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                detail = f"{exc.strerror}: raise the open-files limit (ulimit -n) or lower the load"
                raise _Failure("error", reasons.CLIENT_LIMIT, detail) from None
            raise _Failure("error", reasons.CANNOT_CONNECT, f"{type(exc).__name__}: {exc}") from None

    async def _resend(
        self,
        payload: bytes,
        rec: RequestRecord,
        decoder: StreamDecoder,
        trace_ctx: dict[str, float],
        deadline: asyncio.Timeout,
        started: float,
    ) -> None:
        """Send a request whose write failed again, on another connection, a few times at most."""
        for _ in range(STALE_RETRIES):
            trace_ctx.clear()  # the server never had it: its submission is the write that goes through
            try:
                await self._exchange(payload, rec, decoder, trace_ctx, deadline, started)
                return
            except _Stale:
                continue
        raise _Failure("error", reasons.CLOSED_BEFORE_RESPONSE, STALE_DETAIL)

    def _timed_out(self, state: StreamState, trace_ctx: dict[str, float], elapsed: float) -> _Failure:
        cfg = self.config
        if state.content_started or elapsed >= cfg.total_timeout:
            return _Failure(
                "timeout", reasons.TOTAL_TIMEOUT, f"not finished within {cfg.total_timeout:g} s ({state.tokens} tokens)"
            )
        where = "no response" if state.headers_at is None else "no content token"
        if "sent" not in trace_ctx:
            where = "the request was not sent"
        return _Failure("timeout", reasons.FIRST_TOKEN_TIMEOUT, f"{where} within {cfg.first_token_timeout:g} s")

    def _fill(self, rec: RequestRecord, stream: StreamState, trace_ctx: dict[str, float]) -> None:
        if rec.submitted_at == 0.0 and "sent" in trace_ctx:
            rec.submitted_at = self.clock.at(trace_ctx["sent"])
        rec.chunk_times = stream.chunk_times
        rec.chunk_tokens = stream.chunk_tokens
        rec.token_times = [t for t, k in zip(stream.chunk_times, stream.chunk_tokens, strict=True) for _ in range(k)]
        received = len(rec.token_times)
        server = stream.server
        anchor = rec.submitted_at
        if server.response_start is not None and stream.headers_at is not None:
            # both sides saw the response headers leave/arrive: anchoring there cancels the request's upload time
            anchor = stream.headers_at - server.response_start
        rec.output_tokens = stream.usage_completion if stream.usage_completion is not None else received
        if stream.usage_prompt is not None:
            rec.input_tokens = stream.usage_prompt
        if server.token_offsets is not None and len(server.token_offsets) == received:
            rec.server_token_times = [anchor + off for off in server.token_offsets]
        rec.cached_tokens = server.cached_tokens
        rec.server_prefill_s = server.prefill_s
        rec.server_decode_s = server.decode_s
        rec.finish_reason = stream.finish_reason
        rec.no_done = True if stream.no_done else None
        if self.config.count_text is not None:
            rec.ref_output_tokens = self.config.count_text("".join(stream.text))


def _error_detail(head: Head, body: bytes | bytearray) -> str:
    """The reason phrase, Retry-After when given, and the start of the body (redacted by the caller)."""
    parts = [head.reason]
    retry = head.headers.get("retry-after")
    if retry is not None:
        parts.append(f"Retry-After {retry.strip()[:40]}" + (" s" if retry.strip().isdigit() else ""))
    elif head.status == 429:
        parts.append("no Retry-After")
    text = bytes(body).decode("utf-8", "replace").strip().replace("\n", " ")
    if text:
        parts.append(text[:300])
    return ", ".join(p for p in parts if p)
