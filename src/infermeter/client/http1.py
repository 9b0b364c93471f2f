"""A lean HTTP/1.1 client for streamed replies, built on asyncio protocols.

Each read of a reply is handed to its `Reply` inside the event loop's read callback, with the time the read
returned: no task wakes per event, so a run's sends are not queued behind thousands of receivers.  After each read
the pool calls its `after_read` hook, if set: the open loop sends what has fallen due there, between two reads, rather
than after the loop's whole turn of reads.  A request counts
as sent when its last byte has left the process (the socket took all of it, or the write buffer drained).  Bodies
framed by Content-Length, chunked encoding or the connection's close; kept-alive connections are pooled.  Through an
HTTP proxy (client.proxy), an http:// origin's requests go to the proxy in absolute form and an https:// origin is
reached through a CONNECT tunnel, TLS inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from infermeter.client.proxy import Proxy, proxy_for

MAX_HEAD = 65536  # a response head larger than this is not a server speaking HTTP to us


class ProtocolError(Exception):
    """The bytes the server sent are not an HTTP/1.1 response."""


class ConnectionEnded(Exception):
    """The connection ended before the reply did; `responded`: whether any byte of the reply had arrived."""

    def __init__(self, responded: bool, cause: BaseException | None) -> None:
        why = f"{type(cause).__name__}: {cause}" if cause is not None else "the server closed the connection"
        super().__init__(why)
        self.responded = responded


@dataclass
class Head:
    """The status line and headers of a reply (header names lower-cased)."""

    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)


class Outgoing:
    """One request's write: `at` is the perf_counter time its last byte left the process (None until then), kept
    with the request, not the connection, which may carry the next request before this one's task looks."""

    __slots__ = ("at", "left")

    def __init__(self) -> None:
        self.at: float | None = None
        self.left: asyncio.Future[None] | None = None  # set while bytes wait in the transport's buffer

    async def drained(self) -> None:
        """Until the last byte has left the process (at once when the socket took it all)."""
        if self.left is not None:
            await self.left

    def _leave(self, at: float | None) -> None:
        if self.at is None:
            self.at = at
        if self.left is not None and not self.left.done():
            self.left.set_result(None)


class Reply(Protocol):
    """Where a connection delivers one reply, from the event loop's read callback."""

    def on_head(self, head: Head, now: float) -> None: ...

    def on_body(self, data: bytes, now: float) -> None:
        """Body bytes (chunk framing removed) that arrived in the read returning at `now` (time.perf_counter)."""
        ...

    def on_end(self, error: BaseException | None) -> None:
        """The reply is complete (None) or cannot be: a ConnectionEnded, a ProtocolError or what on_body raised."""
        ...


_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER, _UNTIL_CLOSE, _IDLE = range(8)
_CHUNKED = (_CHUNK_SIZE, _CHUNK_DATA, _CHUNK_CRLF, _TRAILER)


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: writes a request, parses its reply into the Reply it was given."""

    def __init__(self, on_idle: Callable[[Connection], None], after_read: Callable[[], None]) -> None:
        self.transport: asyncio.Transport | None = None
        self.reply: Reply | None = None
        self.requests = 0  # sent on this connection so far (more than one: it was reused)
        self.closed = False
        self._out: Outgoing | None = None  # the current request's write
        self._on_idle = on_idle
        self._after_read = after_read
        self._buf = b""
        self._state = _IDLE
        self._left = 0  # bytes left in the body or the current chunk
        self._keep = False
        self._responded = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream protocol is handed a stream transport (uvloop's do not subclass asyncio.Transport, so no isinstance)
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.set_write_buffer_limits(high=0)  # paused while anything waits to leave: resume = all sent

    def pause_writing(self) -> None:
        if self._out is not None and self._out.left is None:
            self._out.left = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._out is not None:
            self._out._leave(time.perf_counter())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._out is not None:
            self._out._leave(None)  # never sent whole: the reply's end says what happened
        if self.reply is None:
            return
        if self._state == _UNTIL_CLOSE and exc is None:
            self._finish(None)
        else:
            self._finish(ConnectionEnded(self._responded, exc))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if self.reply is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted again
            return
        try:
            self._parse(data, now)
        except Exception as exc:  # a malformed reply, or what the reply's reader raised: this reply ends here
            self._finish(exc)  # an error ends the connection too
        try:
            self._after_read()
        except Exception as exc:  # the open loop's pacer failing is not this connection's failure
            context = {"message": "the open loop's pacer failed after a read", "exception": exc, "protocol": self}
            asyncio.get_running_loop().call_exception_handler(context)

    # requests
    def send(self, request: bytes, reply: Reply) -> Outgoing:
        """Write a whole request; its reply goes to `reply`.  The Outgoing returned is stamped once every byte has
        left: when the socket took them all in the write call, the moment that call began (the bytes left during it,
        microseconds, and a server may read them before the call returns); else when the transport's buffer
        drained."""
        assert self.transport is not None and self.reply is None
        self.reply, self._responded = reply, False
        self._state, self._buf = _HEAD, b""
        self.requests += 1
        out = self._out = Outgoing()
        began = time.perf_counter()
        self.transport.write(request)
        if self.transport.get_write_buffer_size() == 0:
            out.at = began
        return out

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # parsing
    def _finish(self, error: BaseException | None) -> None:
        reply, self.reply = self.reply, None
        self._state = _IDLE
        if reply is not None:
            reply.on_end(error)
        if error is None and self._keep and not self.closed:
            self._on_idle(self)
        elif not self.closed:
            self.abort()

    def _parse(self, data: bytes, now: float) -> None:
        if self._state == _HEAD:
            self._responded = True
            self._buf += data
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    raise ProtocolError(f"no end of the response head within {MAX_HEAD} bytes")
                return
            head_bytes, data, self._buf = self._buf[:end], self._buf[end + 4 :], b""
            if not self._head(head_bytes, now):  # 1xx: another head follows
                self._state = _HEAD
                if data:
                    self._parse(data, now)
                return
        if self._state == _LENGTH:
            piece = data[: self._left]
            self._left -= len(piece)
            if piece:
                self._deliver(piece, now)
            if self._left == 0:
                self._finish(None)
        elif self._state == _UNTIL_CLOSE:
            if data:
                self._deliver(data, now)
        elif self._state in _CHUNKED and (data or self._buf):
            self._chunks(data, now)

    def _head(self, raw: bytes, now: float) -> bool:
        """Parse a response head; False for an interim (1xx) reply."""
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:
            return False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError(f"malformed header line: {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        self._keep = parts[0] == "HTTP/1.1" and "close" not in connection
        head = Head(status, parts[2] if len(parts) > 2 else "", headers)
        assert self.reply is not None
        self.reply.on_head(head, now)
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._state, self._left = _CHUNK_SIZE, 0
        elif "content-length" in headers:
            try:
                self._left = int(headers["content-length"])
            except ValueError:
                raise ProtocolError(f"bad Content-Length: {headers['content-length'][:40]!r}") from None
            self._state = _LENGTH
            if self._left == 0 or status in (204, 304):
                self._finish(None)
        elif status in (204, 304):
            self._finish(None)
        else:
            self._state, self._keep = _UNTIL_CLOSE, False
        return True

    def _chunks(self, data: bytes, now: float) -> None:
        """Chunked transfer coding: deliver every chunk's data that arrived in this read, as one piece."""
        buf = self._buf + data if self._buf else data
        self._buf = b""
        out: list[bytes] = []
        pos = 0
        while pos < len(buf) and self.reply is not None:
            if self._state == _CHUNK_DATA:
                take = min(self._left, len(buf) - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = _CHUNK_CRLF
                continue
            end = buf.find(b"\r\n", pos)
            if end < 0:
                if len(buf) - pos > MAX_HEAD:
                    raise ProtocolError("a chunk-size line without its end")
                self._buf = buf[pos:]
                break
            line, pos = buf[pos:end], end + 2
            if self._state == _CHUNK_CRLF:
                if line:
                    raise ProtocolError("chunk data longer than its declared size")
                self._state = _CHUNK_SIZE
            elif self._state == _CHUNK_SIZE:
                try:
                    size = int(line.split(b";", 1)[0], 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size line: {line[:40]!r}") from None
                if size == 0:
                    self._state = _TRAILER
                else:
                    self._state, self._left = _CHUNK_DATA, size
            elif not line:  # _TRAILER: the empty line ends the body
                if out:
                    self._deliver(b"".join(out), now)
                    out = []
                self._finish(None)
                return
        if out:
            self._deliver(b"".join(out), now)

    def _deliver(self, data: bytes, now: float) -> None:
        assert self.reply is not None
        self.reply.on_body(data, now)


class Pool:
    """Kept-alive connections to one origin, opened as requests need them (at most `limit` when > 0), directly or
    through the HTTP proxy the environment names for it (client.proxy)."""

    def __init__(
        self, base_url: str, connect_timeout: float, limit: int = 0, tls: ssl.SSLContext | None = None
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = (tls or ssl.create_default_context()) if parts.scheme == "https" else None
        default = 443 if parts.scheme == "https" else 80
        bracketed = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = bracketed + ("" if self.port == default else f":{self.port}")
        self.proxy = proxy_for(base_url)
        self._authority = f"{bracketed}:{self.port}"  # what a CONNECT asks the proxy for
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        # the request line's target: the path, or the whole URL when an http:// origin is reached through a proxy
        self.target = f"{parts.scheme}://{self.host_header}{path}" if self.absolute_form else path
        self.connect_timeout = connect_timeout
        self._idle: list[Connection] = []
        self._all: weakref.WeakSet[Connection] = weakref.WeakSet()  # open or in use: a closed one drops out
        self._slots = asyncio.Semaphore(limit) if limit > 0 else None
        self._address: tuple[int, tuple[Any, ...]] | None = None  # resolved once: (family, sockaddr)
        self.after_read: Callable[[], None] | None = None  # called after each read of a reply is handled

    @property
    def absolute_form(self) -> bool:
        """Whether requests name the whole URL (an http:// origin through a proxy) rather than the path alone."""
        return self.proxy is not None and self.ssl is None

    def via(self) -> str:
        """What run.json's client transport adds about the proxy ('' without one)."""
        return "" if self.proxy is None else f", through the {self.proxy.describe()}"

    def proxy_headers(self) -> list[str]:
        """Header lines every request carries for the proxy (its credentials, on absolute-form requests)."""
        if self.absolute_form and self.proxy is not None and self.proxy.authorization is not None:
            return [f"Proxy-Authorization: {self.proxy.authorization}"]
        return []

    def take_idle(self) -> Connection | None:
        """An idle kept-alive connection at once, without awaiting; None when there is none, or when connections
        are limited (that wait is `acquire`'s)."""
        return self._pop_idle() if self._slots is None else None

    def _pop_idle(self) -> Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def acquire(self) -> Connection:
        """An idle kept-alive connection, or a new one (OSError, TimeoutError on failure to connect)."""
        if self._slots is not None:
            await self._slots.acquire()
        try:
            return self._pop_idle() or await self._connect()
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise

    def release(self, conn: Connection, reply: Reply) -> None:
        """Done with a connection: one whose reply ended went back to the idle ones already (and may carry another
        request by now); one still busy with `reply` (cancelled, timed out, cut short) is closed."""
        if conn.reply is reply:
            conn.abort()
        if self._slots is not None:
            self._slots.release()

    def _idle_again(self, conn: Connection) -> None:
        if not conn.closed:
            self._idle.append(conn)

    def _read_done(self) -> None:
        hook = self.after_read
        if hook is not None:
            hook()

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        host, port = (self.proxy.host, self.proxy.port) if self.proxy is not None else (self.host, self.port)
        async with asyncio.timeout(self.connect_timeout):
            if self._address is None:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                if not infos:
                    raise OSError(f"cannot resolve {host}")
                self._address = (infos[0][0], tuple(infos[0][4]))
            family, addr = self._address
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, addr)
                if self.proxy is not None and self.ssl is not None:
                    await self._tunnel(loop, sock, self.proxy)
                _, conn = await loop.create_connection(
                    lambda: Connection(self._idle_again, self._read_done),
                    sock=sock,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl is not None else None,
                )
            except BaseException:
                sock.close()
                raise
        self._all.add(conn)
        return conn

    async def _tunnel(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, proxy: Proxy) -> None:
        """Ask the proxy on `sock` for a tunnel to the origin (CONNECT); OSError when it refuses."""
        lines = [f"CONNECT {self._authority} HTTP/1.1", f"Host: {self._authority}"]
        if proxy.authorization is not None:
            lines.append(f"Proxy-Authorization: {proxy.authorization}")
        await loop.sock_sendall(sock, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = await loop.sock_recv(sock, 4096)
            if not data:
                raise OSError(f"the {proxy.describe()} closed the connection before answering CONNECT")
            buf += data
            if len(buf) > MAX_HEAD:
                raise OSError(f"the {proxy.describe()} answered CONNECT with no end of its head")
        head, _, rest = buf.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].startswith("2") or rest:
            raise OSError(f"the {proxy.describe()} refused CONNECT {self._authority}: {status[:80]!r}")

    async def close(self) -> None:
        for conn in list(self._all):
            conn.abort()
        self._all.clear()
        self._idle.clear()
        await asyncio.sleep(0)  # let the transports finish closing
