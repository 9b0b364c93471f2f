"""The emulator's lean HTTP/1.1 front end: streamed completions served straight from an asyncio protocol, every
other request handed to aiohttp.

aiohttp's machinery per request (request and response objects, the handler's coroutine, header multidicts) took
~60 us of the emulator's core per stream: 12% of the core at 2,000 streams a second, on top of the writes.  A
connection starts here; a request this front end serves exactly as the aiohttp application would (POST
/v1/completions or /v1/chat/completions over HTTP/1.1, a well-formed head within aiohttp's limits, a JSON body of
Content-Length bytes, "stream": true, valid, no images or audio) is answered here, with no task per request; at the
first request that is anything else (another path or method, an error to answer, a chunked or encoded body, Expect,
Connection: close, HTTP/1.0) the connection is handed to aiohttp's own protocol with the bytes read so far, and
aiohttp serves it from then on.  Only an emulator with nothing that changes a request's path (faults, guardrails, an
API key) uses it (`Emulator.lean`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from aiohttp import web

from infermeter import __version__
from infermeter.emulator.direct_events import DirectEvents
from infermeter.emulator.engine_loop import Handle
from infermeter.emulator.media_cost import has_media
from infermeter.emulator.openai_format import error_body, parse_body
from infermeter.emulator.server import Emulator

PATHS = {b"/v1/completions": False, b"/v1/chat/completions": True}  # path -> chat
MAX_LINE = 8190  # aiohttp's limit on a request line or header line; beyond it aiohttp answers
MAX_HEADERS = 128  # aiohttp's limit on the number of headers
MAX_BODY = 64 * 1024**2  # the application's client_max_size; beyond it aiohttp answers 413
HANDED_OVER = ("transfer-encoding", "content-encoding", "expect", "upgrade")  # semantics aiohttp implements
# a header line as RFC 9110 has it: a token, a colon, a value of visible characters, spaces and tabs (and obs-text);
# anything else (a bare CR or LF, a control byte, a space in the name) is aiohttp's to answer
HEADER = re.compile(
    rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[ \t]*((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*"
)


@dataclass
class _Request:
    chat: bool
    body: dict[str, Any]
    tokens: list[int]
    max_tokens: int
    priority: int
    received: float


@dataclass
class _Stream:
    events: DirectEvents
    handle: Handle
    request: _Request
    sent: float
    finished: bool = False  # its last token is out (the end is written on the loop's next turn)


class LeanFront(asyncio.Protocol):
    """One connection: the streams it can serve, until a request it cannot (then aiohttp's protocol takes over)."""

    def __init__(self, emulator: Emulator, aiohttp_protocol: Callable[[], asyncio.Protocol], fronts: Fronts) -> None:
        self.emulator, self.aiohttp_protocol, self.fronts = emulator, aiohttp_protocol, fronts
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.stream: _Stream | None = None
        self.paused = False  # the transport's buffer is over its high-water mark
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream server's transports are stream transports
        self.fronts.open.add(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.stream is None:
            self._serve()

    def connection_lost(self, exc: Exception | None) -> None:
        self.fronts.discard(self)
        stream, self.stream = self.stream, None
        if stream is None:
            return
        if stream.finished:  # served in full, the end not yet written: counted as the application counts it
            self.emulator.account(stream.events.times, stream.request.received, stream.handle)
        else:
            assert self.emulator.engine is not None
            self.emulator.engine.abandon(stream.handle)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False

    @property
    def idle(self) -> bool:
        return self.stream is None

    def _serve(self) -> None:
        """Serve the buffered requests this front end can, one at a time; hand the connection over at one it cannot."""
        while self.stream is None and self.buffer and self.transport is not None and not self.transport.is_closing():
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                if len(self.buffer) > MAX_LINE or b"\n\n" in self.buffer:  # too long, or LF alone ending it
                    self._hand_over()
                return
            head = bytes(self.buffer[:head_end])
            length = _content_length(head)
            if length is None:
                self._hand_over()
                return
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            request = self._request(head, bytes(self.buffer[head_end + 4 : end]))
            if request is None:
                self._hand_over()
                return
            del self.buffer[:end]
            self._start(request)

    def _request(self, head: bytes, raw: bytes) -> _Request | None:
        """The stream a request asks for, or None when aiohttp is to answer it (as it would have: an error, or a
        request this front end does not serve); nothing is changed before it is known."""
        line = head.split(b"\r\n", 1)[0].split(b" ")
        if len(line) != 3 or line[0] != b"POST" or line[1] not in PATHS or line[2] != b"HTTP/1.1":
            return None
        chat = PATHS[line[1]]
        em = self.emulator
        try:
            body = parse_body(raw)
            if body.get("stream") is not True or (chat and has_media(body.get("messages"))):
                return None  # a whole reply, or images and audio to read: the application's
            tokens = em.request_tokens(body, chat)
            max_tokens, priority = em.generation(body, len(tokens))
        except Exception:  # an HTTP 400 to answer, or a failure the application answers with a 500
            return None
        return _Request(chat, body, tokens, max_tokens, priority, time.perf_counter())

    def _start(self, r: _Request) -> None:
        assert self.transport is not None
        em = self.emulator
        handle = em.submit(r.tokens, r.max_tokens, em.cache_lookup(r.tokens), r.priority)
        if isinstance(handle, str):  # the engine can never serve it: HTTP 400, as the application answers
            self.transport.write(_bad_request(handle))
            return
        self.transport.write(_stream_head())
        sent = time.perf_counter()
        events = em.direct_events(self.transport, True, em.new_id(r.chat), r.chat, self._ended)
        self.stream = _Stream(events, handle, r, sent)
        events.start(handle)

    def _ended(self, finished: bool) -> None:
        """From the engine's turn: the stream's end is written on the loop's next (the engine's steps go first)."""
        if finished and self.stream is not None:
            self.stream.finished = True
            self.loop.call_soon(self._end)

    def _end(self) -> None:
        stream, self.stream = self.stream, None
        if stream is None or self.transport is None:
            return
        r = stream.request
        self.emulator.account(stream.events.times, r.received, stream.handle)
        last = stream.events.last(r.body, len(r.tokens), r.received, stream.sent, stream.handle)
        if not self.transport.is_closing():
            self.transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(last), last))
        if self.fronts.closing:
            self.transport.close()
            return
        self._serve()

    def _hand_over(self) -> None:
        """aiohttp's protocol takes the connection, with what was read of it; this front end is done with it."""
        assert self.transport is not None
        self.fronts.discard(self)
        protocol = self.aiohttp_protocol()
        self.transport.set_protocol(protocol)
        protocol.connection_made(self.transport)
        if self.paused:  # the transport told this protocol; the new one is to know (it resumes on the next call)
            protocol.pause_writing()
        buffered, self.buffer = bytes(self.buffer), bytearray()
        if buffered:
            protocol.data_received(buffered)
        self.transport = None


async def start_lean(
    emulator: Emulator, aiohttp_server: web.Server, fronts: Fronts, host: str, port: int
) -> asyncio.Server:
    """Listen on host:port with the lean front end (aiohttp's `aiohttp_server` takes what it hands over; `fronts`
    holds the connections it serves)."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: LeanFront(emulator, aiohttp_server, fronts), host, port, backlog=4096)


class Fronts:
    """The connections the lean front end holds, to close them when the server stops."""

    def __init__(self) -> None:
        self.open: set[LeanFront] = set()
        self.closing = False
        self._drained = asyncio.Event()  # set when the last connection goes while closing

    def discard(self, front: LeanFront) -> None:
        self.open.discard(front)
        if self.closing and not self.open:
            self._drained.set()

    async def close(self, timeout_s: float) -> None:
        """Close idle connections now and the others once their stream ends (at most `timeout_s`), as aiohttp's
        graceful shutdown does."""
        self.closing = True
        for front in list(self.open):
            if front.idle and front.transport is not None:
                front.transport.close()
                self.discard(front)
        if self.open:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), timeout_s)
        for front in list(self.open):
            if front.transport is not None:
                front.transport.abort()


def _content_length(head: bytes) -> int | None:
    """The body's length when the head is one this front end serves: well-formed lines within aiohttp's limits,
    Content-Length once, and none of the headers whose semantics aiohttp implements (nor Connection: close); else
    None."""
    lines = head.split(b"\r\n")
    if len(lines) - 1 > MAX_HEADERS or any(len(line) > MAX_LINE for line in lines):
        return None
    length = None
    for line in lines[1:]:
        m = HEADER.fullmatch(line)
        if m is None:
            return None
        key, value = m.group(1).lower().decode("latin-1"), m.group(2)
        if key in HANDED_OVER:
            return None
        if key == "connection" and value.lower() != b"keep-alive":
            return None
        if key == "content-length":
            if length is not None or not value.isdigit():
                return None
            length = int(value)
    return length if length is not None and length <= MAX_BODY else None


_date = (0, b"")


def _http_date() -> bytes:
    """The Date header's value, made once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, email.utils.formatdate(now, usegmt=True).encode())
    return _date[1]


_SERVER = f"infermeter-emulator/{__version__}".encode()


def _stream_head() -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\nDate: %s\r\nServer: %s\r\n\r\n" % (_http_date(), _SERVER)
    )


def _bad_request(message: str) -> bytes:
    body = error_body(message)
    return (
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: %d\r\n"
        b"Date: %s\r\nServer: %s\r\n\r\n%s" % (len(body), _http_date(), _SERVER, body)
    )
