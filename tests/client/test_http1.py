"""The lean HTTP/1.1 client's framing against servers that answer in every shape HTTP allows: a body closed by the
connection, chunks split at every byte, an interim 100 Continue, and bytes that are not HTTP at all."""

import asyncio
import contextlib
import time

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest, reasons
from infermeter.records import RunClock, failure_reason

EVENTS = b'data: {"choices":[{"text":" a"}]}\n\ndata: {"choices":[{"text":" b"}]}\n\ndata: [DONE]\n\n'


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length"))
    await reader.readexactly(length)


async def _one(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    clock = RunClock()
    client = OpenAIClient(ClientConfig(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", model="m"), clock)
    rec = await client.send(PreparedRequest(0, "x", 1, 2), clock.now())
    await client.close()
    server.close()
    return rec


def test_a_body_ended_by_closing_the_connection_is_read_to_its_end():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + EVENTS)
        await writer.drain()
        writer.close()

    rec = asyncio.run(_one(handler))
    assert rec.status == "ok" and rec.output_tokens == 2, rec.error


def test_chunks_split_at_every_byte_and_an_interim_response_are_reassembled():
    async def handler(reader, writer):
        await _read_request(reader)
        reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        reply += b"".join(b"%x;ext=1\r\n%s\r\n" % (len(e + b"\n\n"), e + b"\n\n") for e in EVENTS.split(b"\n\n")[:-1])
        reply += b"0\r\nTrailer: x\r\n\r\n"
        for i in range(len(reply)):
            writer.write(reply[i : i + 1])
            await writer.drain()
            if i % 64 == 0:
                await asyncio.sleep(0.001)  # some bytes in reads of their own
        writer.close()

    rec = asyncio.run(_one(handler))
    assert rec.status == "ok" and rec.output_tokens == 2, rec.error
    assert len(rec.token_times) == 2 and rec.token_times[0] < rec.token_times[1]


def test_bytes_that_are_not_http_end_the_record_with_their_reason():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(0.5)
        writer.close()

    rec = asyncio.run(_one(handler))
    assert rec.status == "error" and failure_reason(rec.error) == reasons.MALFORMED_HTTP, rec.error
    assert "SSH-2.0" in rec.error


def test_a_request_is_stamped_sent_before_the_server_has_read_it():
    """submitted_at is taken once the last byte left the client: the server (same machine, same monotonic clock)
    reads the whole request after it, on a fresh connection and on a kept-alive one."""
    read_at: list[float] = []

    async def handler(reader, writer):
        while True:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            read_at.append(time.perf_counter())
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(EVENTS), EVENTS))
            await writer.drain()
        writer.close()

    async def go():
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        clock = RunClock()
        config = ClientConfig(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", model="m")
        client = OpenAIClient(config, clock)
        recs = [await client.send(PreparedRequest(i, "x", 1, 2), clock.now()) for i in range(3)]
        await client.close()
        server.close()
        return clock, recs

    clock, recs = asyncio.run(go())
    assert [r.status for r in recs] == ["ok"] * 3 and len(read_at) == 3
    for rec, read in zip(recs, read_at, strict=True):
        assert rec.scheduled_at <= rec.submitted_at <= read - clock.t0 < rec.token_times[0]


def _keep_alive_server(read_at: list[float], got: asyncio.Event, gap_s: float = 0.0):
    """Answers every request of a kept-alive connection: the head, then each event in its own write `gap_s` apart."""

    async def handler(reader, writer):
        while True:
            try:
                await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            read_at.append(time.perf_counter())
            got.set()
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for event in EVENTS.split(b"\n\n")[:-1]:
                await asyncio.sleep(gap_s)
                writer.write(b"%x\r\n%s\n\n\r\n" % (len(event) + 2, event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        writer.close()

    return handler


async def _served(handler, max_connections: int = 0):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    clock = RunClock()
    config = ClientConfig(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", model="m")
    return server, clock, OpenAIClient(config, clock, max_connections)


async def _started(client: OpenAIClient, clock: RunClock, got: asyncio.Event, req: PreparedRequest, wait_s: float):
    """`start` a request; whether the server read it before its coroutine ran a step (`got`, waited for up to
    `wait_s`), then its record."""
    got.clear()
    rec = req.record(clock.now())
    exchange = client.start(req, rec.scheduled_at, rec)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(got.wait(), wait_s)
    left_at_once = got.is_set()
    return left_at_once, await exchange


def test_start_writes_on_an_idle_connection_before_its_coroutine_runs():
    """The open loop's sends leave from inside the event loop's callbacks: `start` writes the request at once on an
    idle kept-alive connection (the server reads it while the returned coroutine has not run a step); without an
    idle connection (the first request, or a connection limit) nothing leaves until it is awaited."""

    async def go(max_connections: int) -> tuple[bool, bool, list]:
        read_at: list[float] = []
        got = asyncio.Event()
        server, clock, client = await _served(_keep_alive_server(read_at, got), max_connections)
        first_left_early, first = await _started(client, clock, got, PreparedRequest(0, "x", 1, 2), 0.05)
        second_left_early, second = await _started(client, clock, got, PreparedRequest(1, "x", 1, 2), 0.5)
        recs = [first, second]
        await client.close()
        server.close()
        return first_left_early, second_left_early, [(r, t - clock.t0) for r, t in zip(recs, read_at, strict=True)]

    first_early, second_early, recs = asyncio.run(go(0))
    assert not first_early and second_early
    for rec, read in recs:
        assert rec.status == "ok" and rec.output_tokens == 2
        assert rec.scheduled_at <= rec.submitted_at <= read < rec.token_times[0]
    first_early, second_early, recs = asyncio.run(go(1))
    assert not first_early and not second_early  # with a limit, the wait for a slot is acquire's
    assert [rec.status for rec, _ in recs] == ["ok", "ok"]


def test_the_pace_hook_is_called_after_each_read_of_a_reply_until_it_is_taken_away():
    async def go() -> tuple[int, int]:
        got = asyncio.Event()
        server, clock, client = await _served(_keep_alive_server([], got, gap_s=0.05))
        calls = [0]

        def hook() -> None:
            calls[0] += 1

        client.pace(hook)
        rec = await client.send(PreparedRequest(0, "x", 1, 2), clock.now())
        assert rec.status == "ok"
        paced = calls[0]
        client.pace(None)
        await client.send(PreparedRequest(1, "x", 1, 2), clock.now())
        await client.close()
        server.close()
        return paced, calls[0]

    paced, after = asyncio.run(go())
    assert paced >= 2  # the head, then three events 50 ms apart: a read each (called once per reply, it would be 1)
    assert after == paced


def test_a_body_that_cannot_be_encoded_is_a_failed_record_and_keeps_no_connection():
    """A prompt holding a lone surrogate is not JSON: by `send` or `start` it is an error record saying so (never an
    "ok" record without tokens), and the idle connection `start` would have used carries the next request at once."""

    async def go() -> tuple[list, bool]:
        got = asyncio.Event()
        server, clock, client = await _served(_keep_alive_server([], got))
        recs = [await client.send(PreparedRequest(0, "x", 1, 2), clock.now())]
        bad = PreparedRequest(1, "\ud800", 1, 2)
        recs.append(await client.send(bad, clock.now()))
        recs.append(await client.start(bad, clock.now(), bad.record(clock.now())))
        written_at_once, good = await _started(client, clock, got, PreparedRequest(2, "x", 1, 2), 2.0)
        recs.append(good)
        await client.close()
        server.close()
        return recs, written_at_once

    recs, written_at_once = asyncio.run(go())
    assert [r.status for r in recs] == ["ok", "error", "error", "ok"]
    for rec in recs[1:3]:
        assert failure_reason(rec.error) == reasons.CLIENT_ERROR and "cannot be encoded as JSON" in rec.error
    assert written_at_once


def test_a_request_keeps_its_own_send_time_when_its_connection_carries_the_next_before_its_task_runs():
    """`start` writes R1; its whole reply is read and its connection, idle again, carries R2 (also by `start`)
    before R1's task has run a step: R1's submitted_at is its own write's, before its first token and R2's send."""

    async def go() -> tuple:
        got = asyncio.Event()
        server, clock, client = await _served(_keep_alive_server([], got))
        await client.send(PreparedRequest(0, "x", 1, 2), clock.now())  # a kept-alive connection, idle
        r1, r2 = PreparedRequest(1, "x", 1, 2), PreparedRequest(2, "x", 1, 2)
        rec1 = r1.record(clock.now())
        first = client.start(r1, rec1.scheduled_at, rec1)
        await asyncio.sleep(0.2)  # R1's whole reply arrives; `first` has not run
        rec2 = r2.record(clock.now())
        second = client.start(r2, rec2.scheduled_at, rec2)  # the same connection: the only idle one
        out = await first, await second
        await client.close()
        server.close()
        return out

    rec1, rec2 = asyncio.run(go())
    assert rec1.status == rec2.status == "ok"
    assert rec1.submitted_at < rec1.token_times[0] < rec2.scheduled_at <= rec2.submitted_at
