"""The lean HTTP/1.1 client's framing against servers that answer in every shape HTTP allows: a body closed by the
connection, chunks split at every byte, an interim 100 Continue, and bytes that are not HTTP at all."""

import asyncio
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
