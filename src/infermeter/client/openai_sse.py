"""The HTTP client of every --api format (client.apis): OpenAI completions, chat and Responses streamed over SSE,
embeddings and rerank answered in one body, and the engines' native streams.

Every SSE event is timestamped on the run clock when the read that completed its `data:` line returns (draft
B.1.1), stamped inside the event loop's read callback (`client.http1`); `submitted_at` is when the request's last
byte left the process (the socket took it).  A reply that is one body (embeddings, rerank) has no first token: it
is timed at its last read (`completed_at`), waited for under the total timeout alone, and must answer each input
sent once.  Each request ends in exactly one RequestRecord, whatever goes wrong, its error naming a reason from
`client.reasons`.  Nothing raises out of `send` except cancellation, which propagates (as asyncio requires) after
the record passed in has been completed with status "cancelled".
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from infermeter import secrets
from infermeter.client import reasons
from infermeter.client.apis import Decoder, api_format, declare, endpoint_url
from infermeter.client.events import StreamFailure, StreamState
from infermeter.client.headers import request_heads
from infermeter.client.http1 import Connection, ConnectionEnded, Head, Outgoing, Pool, ProtocolError
from infermeter.client.request import Api, ClientConfig, Message, PreparedRequest, RerankShape
from infermeter.client.server_tokenizer import ServerTokenizer
from infermeter.errors import UserError
from infermeter.records import RequestRecord, RunClock, Status, failure
from infermeter.run_info import Client

__all__ = ["Api", "ClientConfig", "Message", "OpenAIClient", "PreparedRequest", "RerankShape"]

ERROR_BODY_BYTES = 65536  # read at most this much of an HTTP error response


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

    def __init__(self, clock: RunClock, decoder: Decoder, deadline: asyncio.Timeout | None, total_at: float) -> None:
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
    decoder: Decoder
    payload: bytes
    started: float  # loop.time() when it was written


class OpenAIClient:
    """One aiohttp session shared by every request of a run."""

    def __init__(self, config: ClientConfig, clock: RunClock, max_connections: int = 0) -> None:
        self.config = config
        self.clock = clock
        self._format = api_format(config.api)
        # a reply that is one body (embeddings, rerank) has no first token: the whole wait is the total timeout's
        self._first_timeout = config.first_token_timeout if self._format.generates else config.total_timeout
        try:
            tls = config.tls.context() if config.base_url.startswith("https:") else None
            self._pool = Pool(
                endpoint_url(config), config.connect_timeout, max_connections, tls
            )  # through a proxy if set
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
                connector=aiohttp.TCPConnector(ssl=self._pool.ssl if self._pool.ssl is not None else True),
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
        transport = ("HTTP/1.1 + SSE" if self._format.generates else "HTTP/1.1") + self._pool.via()
        return declare(self.config).model_copy(update={"backend": "openai", "transport": transport})

    async def server_token_count(self, text: str) -> int | None:
        if self._tokenizer is None:
            self._tokenizer = ServerTokenizer(self.config.base_url, self.config.model, self._headers)
        return await self._tokenizer.count(self.session, text)

    @property
    def token_count_source(self) -> str:
        return self._tokenizer.description if self._tokenizer is not None else "none offered"

    def body(self, req: PreparedRequest) -> dict[str, Any]:
        body = self._format.body(req, self.config)
        body.update(self.config.extra_body)
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

    def _decoder(self, req: PreparedRequest) -> Decoder:
        keep_text = self.config.count_text is not None or req.on_reply is not None
        return self._format.decoder(req, keep_text)

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
                async with asyncio.timeout_at(started + min(self._first_timeout, cfg.total_timeout)) as deadline:
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
        decoder: Decoder,
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
        decoder: Decoder,
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
        if not self._format.generates:
            where = "the request was not sent" if "sent" not in trace_ctx else "no whole reply"
            return _Failure("timeout", reasons.TOTAL_TIMEOUT, f"{where} within {cfg.total_timeout:g} s")
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
        rec.completed_at = stream.completed_at
        if rec.inputs is None:  # a request that named no list of inputs: the count its reply answered
            rec.inputs = stream.inputs
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
