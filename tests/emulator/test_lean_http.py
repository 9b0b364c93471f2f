"""The emulator's lean HTTP/1.1 front end: the streams it serves are the aiohttp application's, event for event but
for ids, times and the Server header; whatever it does not serve reaches aiohttp on the same connection; a client
that leaves frees its engine slot; a stopping server lets its streams finish."""

from __future__ import annotations

import asyncio
import re
import time

import orjson
import pytest
import uvloop
from aiohttp import web

from infermeter.emulator import EmulatorConfig
from infermeter.emulator.lean_http import Fronts, start_lean
from infermeter.emulator.routes import application
from infermeter.emulator.server import Emulator

CONFIG = EmulatorConfig(speed=20)


class Served:
    """An emulator in this loop: behind the lean front end, or (lean=False) behind aiohttp alone."""

    def __init__(self, lean: bool = True, config: EmulatorConfig = CONFIG) -> None:
        self.lean, self.emulator = lean, Emulator(config)
        self.handlers = 0  # aiohttp protocols made: connections (or requests) aiohttp was given

    async def __aenter__(self) -> Served:
        self.runner = web.AppRunner(application(self.emulator), access_log=None, handle_signals=False)
        await self.runner.setup()
        server = self.runner.server
        assert server is not None

        def counted() -> asyncio.Protocol:
            self.handlers += 1
            return server()

        if self.lean:
            self.fronts = Fronts()
            self.listener = await start_lean(self.emulator, counted, self.fronts, "127.0.0.1", 0)  # type: ignore[arg-type]
            self.port = self.listener.sockets[0].getsockname()[1]
        else:
            self.site = web.TCPSite(self.runner, "127.0.0.1", 0)
            await self.site.start()
            self.port = self.site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.lean:
            self.listener.close()
            await self.fronts.close(5.0)
        await self.runner.cleanup()


def post(path: str, body: dict | bytes, extra: bytes = b"") -> bytes:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n" % (
        path.encode(),
        extra,
        len(raw),
    )
    return head + raw


async def reply(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One response: status, headers (lower-case names), the body (chunks joined)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    if head.startswith(b"HTTP/1.1 100 "):  # Expect: 100-continue's interim answer
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)).strip(), 16)
            chunk = await asyncio.wait_for(reader.readexactly(size + 2), 10)
            if size == 0:
                return status, headers, body
            body += chunk[:-2]
    return status, headers, await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 10)


def events(body: bytes) -> list[dict | str]:
    """The SSE payloads, with what differs between two servings of a request (ids, times) blanked."""
    out: list[dict | str] = []
    for line in body.decode().split("\n\n"):
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[6:]
        if data == "[DONE]":
            out.append(data)
            continue
        e = orjson.loads(data)
        e["id"] = re.sub(r"[0-9a-f]{16}$", "<id>", e["id"])
        e["created"] = 0
        if "infermeter" in e:
            e["infermeter"] = sorted(e["infermeter"])
        out.append(e)
    return out


REQUESTS = [
    ("/v1/completions", {"prompt": "hello there", "max_tokens": 5, "stream": True}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}),
    ("/v1/completions", {"prompt": "x", "max_tokens": 3, "stream": True, "stream_options": {"include_usage": True}}),
]


async def _serve_all(lean: bool) -> tuple[list, int]:
    async with Served(lean) as s:
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        got = []
        for path, body in REQUESTS:  # kept alive: one connection for all
            writer.write(post(path, body))
            status, headers, data = await reply(reader)
            got.append((status, headers["content-type"], headers["cache-control"], events(data)))
        writer.close()
        return got, s.handlers


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_a_lean_stream_is_the_applications_stream(loop):
    """Completions, chat (the role event first) and usage on request: the same status, headers and events as the
    aiohttp application sends, on one kept-alive connection that aiohttp never sees."""
    run = uvloop.run if loop == "uvloop" else asyncio.run
    lean, handlers = run(_serve_all(True))
    plain, _ = run(_serve_all(False))
    assert handlers == 0
    assert lean == plain
    assert lean[1][3][0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert lean[2][3][-2]["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_what_the_lean_front_end_does_not_serve_reaches_aiohttp_on_the_same_connection(loop):
    """A GET, an error to answer and a non-streamed request, each after a lean stream: aiohttp answers them as the
    application does (the bytes read so far go with the connection), and serves the stream that follows."""

    async def go() -> tuple[list, int]:
        async with Served() as s:
            got = []
            for other in (
                b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
                post("/v1/completions", b"{not json"),
                post("/v1/completions", {"prompt": "a", "max_tokens": 10**7, "stream": True}),
                post("/v1/completions", {"prompt": "a", "max_tokens": 2}),
                post(
                    "/v1/completions", b'{"prompt": "a", "max_tokens": 2, "stream": true}', b"Expect: 100-continue\r\n"
                ),
            ):
                reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
                writer.write(post(*REQUESTS[0]))
                first = await reply(reader)
                writer.write(other)
                second = await reply(reader)
                writer.write(post(*REQUESTS[0]))
                third = await reply(reader)
                writer.close()
                got.append((first[0], second[0], second[2][:200], third[0], len(events(third[2]))))
            return got, s.handlers

    got, handlers = (uvloop.run if loop == "uvloop" else asyncio.run)(go())
    assert handlers == 5  # every connection handed over once
    assert [g[0] for g in got] == [200] * 5 and [g[3] for g in got] == [200] * 5
    assert [g[4] for g in got] == [7] * 5  # 5 tokens, the final event, [DONE]
    health, bad_json, too_long, whole, expect = (g[1:3] for g in got)
    assert health == (200, b"ok")
    assert bad_json[0] == 400 and b"request body is not JSON" in bad_json[1]
    assert too_long[0] == 400 and b"exceeds max_model_len" in too_long[1]
    assert whole[0] == 200 and b'"text_completion"' in whole[1]
    assert expect[0] == 200


def test_requests_sent_together_or_in_pieces_are_each_answered_in_order():
    """Two requests in one write (pipelined) and one split across writes: three streams, in order, all lean."""

    async def go() -> tuple[list, int]:
        async with Served() as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            a = post("/v1/completions", {"prompt": "a", "max_tokens": 2, "stream": True})
            b = post("/v1/completions", {"prompt": "b", "max_tokens": 3, "stream": True})
            c = post("/v1/completions", {"prompt": "c", "max_tokens": 4, "stream": True})
            writer.write(a + b)
            got = [await reply(reader), await reply(reader)]
            for k in range(0, len(c), 17):
                writer.write(c[k : k + 17])
                await writer.drain()
                await asyncio.sleep(0.001)
            got.append(await reply(reader))
            writer.close()
            return [len(events(g[2])) for g in got], s.handlers

    counts, handlers = uvloop.run(go())
    assert counts == [4, 5, 6] and handlers == 0


def test_a_client_that_leaves_mid_stream_is_no_longer_delivered_to():
    """The connection closed after the first token: the engine stops delivering to it (its handle dropped; the
    engine finishes the work, as real engines may) and the server goes on serving others."""

    async def go() -> tuple[int, int, int]:
        async with Served(config=EmulatorConfig()) as s:  # at full model time: 2,000 tokens take tens of seconds
            engine = s.emulator.engine
            assert engine is not None
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(post("/v1/completions", {"prompt": "a", "max_tokens": 2000, "stream": True}))
            await asyncio.wait_for(reader.readuntil(b'"finish_reason":null'), 10)
            during = len(engine._handles)
            writer.close()
            for _ in range(200):
                await asyncio.sleep(0.005)
                if not engine._handles:
                    break
            after = len(engine._handles)
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(post(*REQUESTS[0]))
            status = (await reply(reader))[0]
            writer.close()
            return during, after, status

    during, after, status = uvloop.run(go())
    assert (during, after, status) == (1, 0, 200)


def test_a_stopping_server_lets_its_streams_finish_and_closes_idle_connections():
    """Stopping while one connection streams and another idles: the idle one is closed at once, the stream runs to
    its end (final event, [DONE]) and its connection is closed after it, and the stop ends with it (not at its
    5 s bound)."""

    async def go() -> tuple[bytes, int, bytes, float, float, float]:
        s = Served(config=EmulatorConfig())  # at full model time: the stream outlasts the stop
        await s.__aenter__()
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", s.port)
        reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
        writer.write(post("/v1/completions", {"prompt": "a", "max_tokens": 40, "stream": True}))
        await asyncio.wait_for(reader.readuntil(b'"finish_reason":null'), 10)
        await asyncio.sleep(0.05)  # the idle connection is the lean front end's by now
        stopping = asyncio.create_task(s.__aexit__())

        async def until_closed(r: asyncio.StreamReader) -> tuple[bytes, float]:
            data = await asyncio.wait_for(r.read(), 10)  # to the end and closed
            return data, time.perf_counter()

        (idle, idle_closed), (rest, stream_closed) = await asyncio.gather(
            until_closed(idle_reader), until_closed(reader)
        )
        await stopping
        stopped = time.perf_counter()
        idle_writer.close()
        writer.close()
        return idle, rest.count(b'"finish_reason":null'), rest[-30:], idle_closed, stream_closed, stopped

    idle, tokens, tail, idle_closed, stream_closed, stopped = uvloop.run(go())
    assert idle == b""
    assert idle_closed < stream_closed  # the idle one at once, not after the streams
    assert stopped - stream_closed < 1.0, f"the stop ended {stopped - stream_closed:.2f} s after the last stream"
    assert 0 < tokens < 40
    assert tail.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"), tail


BAD_HEADS = [
    b"X: a\nContent-Length: 3\r\nContent-Length: %d",  # a bare LF: two Content-Lengths to one reader
    b"X: a\x00b\r\nContent-Length: %d",  # a control byte in a value
    b"Bad Name: 1\r\nContent-Length: %d",  # a space in a name
    b"Content-Length: \x0b%d",  # a vertical tab before the length
    b"".join(b"X-%d: 1\r\n" % k for k in range(129)) + b"Content-Length: %d",  # more headers than aiohttp takes
    b"X: " + b"a" * 9000 + b"\r\nContent-Length: %d",  # a line longer than aiohttp takes
]


@pytest.mark.parametrize("head", range(len(BAD_HEADS)))
def test_a_head_aiohttp_would_refuse_is_handed_to_it(head):
    """Request heads that HTTP forbids or aiohttp's limits refuse: the lean front end serves none of them but hands
    the connection over, and the answer is the application's own (400)."""
    body = orjson.dumps(REQUESTS[0][1])
    raw = b"POST /v1/completions HTTP/1.1\r\n" + BAD_HEADS[head] % len(body) + b"\r\n\r\n" + body

    async def go(lean: bool) -> tuple[int, int]:
        async with Served(lean) as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(raw)
            status = (await reply(reader))[0]
            writer.close()
            return status, s.handlers

    lean, plain = uvloop.run(go(True)), uvloop.run(go(False))
    assert lean == (plain[0], 1) and plain[0] == 400, (lean, plain)


def test_a_request_the_application_fails_on_is_answered_by_it(monkeypatch):
    """A failure while reading a request (here the prompt's tokenizer raising) is not the lean front end's to answer:
    the connection goes to aiohttp, which answers 500 as the application always has."""

    def broken(self, body, chat):
        raise RuntimeError("tokenizer failed")

    monkeypatch.setattr(Emulator, "request_tokens", broken)

    async def go(lean: bool) -> tuple[int, int]:
        async with Served(lean) as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(post(*REQUESTS[0]))
            status = (await reply(reader))[0]
            writer.close()
            return status, s.handlers

    assert uvloop.run(go(True)) == (500, 1)
    assert uvloop.run(go(False))[0] == 500


def test_an_engine_refusal_is_the_applications_400():
    """A prompt the engine's KV memory can never hold (within the model's context): HTTP 400 with the application's
    body, answered by the lean front end itself."""
    config = EmulatorConfig(engine={"kv_capacity_tokens": 64}, speed=20)
    request = post("/v1/completions", {"prompt": "word " * 200, "max_tokens": 4, "stream": True})

    async def go(lean: bool) -> tuple[int, bytes, int]:
        async with Served(lean, config) as s:
            reader, writer = await asyncio.open_connection("127.0.0.1", s.port)
            writer.write(request)
            status, _, body = await reply(reader)
            writer.close()
            return status, body, s.handlers

    lean, plain = uvloop.run(go(True)), uvloop.run(go(False))
    assert lean[2] == 0 and lean[:2] == plain[:2] and lean[0] == 400, (lean, plain)
    assert b"more than the engine's capacity" in lean[1]


def test_a_connection_handed_over_while_its_writes_are_paused_stays_paused_for_aiohttp():
    """The transport paused writing while the lean front end held it: the protocol taking over is told so (else
    aiohttp's protocol would be resumed without having been paused, which it refuses)."""

    class Transport:
        def __init__(self) -> None:
            self.protocol = None

        def set_protocol(self, protocol) -> None:
            self.protocol = protocol

        def is_closing(self) -> bool:
            return False

    class Taker(asyncio.Protocol):
        def __init__(self) -> None:
            self.calls: list[str] = []

        def connection_made(self, transport) -> None:
            self.calls.append("made")

        def pause_writing(self) -> None:
            self.calls.append("pause")

        def data_received(self, data: bytes) -> None:
            self.calls.append(data.decode())

    async def go(paused: bool) -> list[str]:
        from infermeter.emulator.lean_http import LeanFront

        taker = Taker()
        front = LeanFront(Emulator(CONFIG), lambda: taker, Fronts())
        front.connection_made(Transport())  # type: ignore[arg-type]
        if paused:
            front.pause_writing()
        front.data_received(b"GET /health HTTP/1.1\r\n\r\n")
        return taker.calls

    assert asyncio.run(go(True)) == ["made", "pause", "GET /health HTTP/1.1\r\n\r\n"]
    assert asyncio.run(go(False)) == ["made", "GET /health HTTP/1.1\r\n\r\n"]
