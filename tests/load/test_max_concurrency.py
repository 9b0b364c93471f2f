"""--rate R --max-concurrency C: an open loop whose sends wait for a free slot while C requests are in flight, the
wait recorded in `slot_wait_s`; the count of requests in flight is taken at the server."""

import asyncio
import contextlib

import numpy as np

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.load import LoadPattern, drive
from infermeter.records import RequestRecord, RunClock

EVENTS = b'data: {"choices":[{"text":" a"}]}\n\ndata: [DONE]\n\n'
REPLY = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(EVENTS), EVENTS)


class HoldingServer:
    """A loopback HTTP/1.1 server that holds each request `hold` seconds before answering, and counts how many it
    holds at once."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.in_flight = 0
        self.most = 0
        self.served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:  # kept alive: one request after another
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-l"))
                await reader.readexactly(length)
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                await asyncio.sleep(self.hold)
                self.in_flight -= 1
                self.served += 1
                writer.write(REPLY)
                await writer.drain()
        writer.close()


async def _run(
    hold: float,
    n: int,
    gap: float,
    cap: int | None,
    stop: asyncio.Event | None = None,
    server: HoldingServer | None = None,
):
    server = server or HoldingServer(hold)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    client = OpenAIClient(ClientConfig(url, model="m"), RunClock())
    records: list[RequestRecord] = []
    pattern = LoadPattern(offsets=np.arange(n) * gap, max_concurrency=cap)
    try:
        await drive(client, [PreparedRequest(i, "p", 1, 1) for i in range(n)], pattern, records.append, stop=stop)
    finally:
        await client.close()
        listener.close()
    return server, records


async def test_never_more_than_the_cap_in_flight_and_every_wait_recorded():
    cap, n = 3, 12
    server, records = await _run(hold=0.2, n=n, gap=0.01, cap=cap)  # all due within 0.11 s, each held 0.2 s
    assert server.most == cap and server.served == n
    assert len(records) == n and all(r.status == "ok" for r in records), [r.error for r in records]
    by_id = sorted(records, key=lambda r: r.request_id)
    assert [r.slot_wait_s for r in by_id[:cap]] == [None] * cap  # a free slot: no wait
    waited = by_id[cap:]
    assert all(r.slot_wait_s is not None and r.slot_wait_s > 0 for r in waited)
    # first come, first served: the waiting sends go in the order they were due
    assert [r.request_id for r in sorted(records, key=lambda r: r.submitted_at)] == list(range(n))
    # the 4th waited for the 1st to finish, held 0.2 s at the server
    assert by_id[cap].slot_wait_s > 0.1


async def test_without_a_cap_nothing_waits():
    server, records = await _run(hold=0.2, n=12, gap=0.01, cap=None)
    assert server.most > 3 and server.served == 12
    assert all(r.slot_wait_s is None for r in records)


async def test_a_stop_leaves_the_waiting_sends_unsent():
    stop = asyncio.Event()
    server = HoldingServer(hold=1.0)

    async def stop_soon() -> None:  # once both slots are held at the server (not after a fixed delay: a busy host)
        while server.in_flight < 2:
            await asyncio.sleep(0.005)
        stop.set()

    stopper = asyncio.create_task(asyncio.wait_for(stop_soon(), 30))
    server, records = await _run(hold=1.0, n=10, gap=0.01, cap=2, stop=stop, server=server)
    await stopper
    assert server.most <= 2 and server.served == 2
    # the two in flight finish in the grace period; the eight waiting for a slot are never sent
    assert sorted(r.request_id for r in records) == [0, 1] and all(r.status == "ok" for r in records)
