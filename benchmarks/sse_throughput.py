"""SSE events per second one client process sustains, against a server streaming pre-built events.

The server (its own process, pinned to the second CPU) answers every request with --events completion events
written in batches of 64, then [DONE]; the client (pinned to the first CPU) runs infermeter's streaming client at
--concurrency streams and parses, timestamps and counts every event.  Target: at least 50,000 events/s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

PREBUILT_SERVER = r"""
import asyncio, os, sys
from aiohttp import web
N = int(sys.argv[1])
EVENT = (b'data: {"id":"cmpl-1","object":"text_completion","created":0,"model":"m",'
         b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}]}\n\n')
BATCH = EVENT * 64
TAIL = b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":%d}}\n\ndata: [DONE]\n\n' % N
async def handle(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for _ in range(N // 64):
        await resp.write(BATCH)
    await resp.write(EVENT * (N % 64) + TAIL)
    return resp
async def main():
    app = web.Application(); app.router.add_post("/v1/completions", handle)
    runner = web.AppRunner(app, access_log=None); await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0); await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
import uvloop; uvloop.run(main())
"""


async def client_run(port: int, concurrency: int, requests: int, events: int) -> tuple[float, int, int]:
    from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
    from infermeter.load import LoadPattern, drive
    from infermeter.records import RunClock

    client = OpenAIClient(ClientConfig(f"http://127.0.0.1:{port}", model="m"), RunClock())
    reqs = [PreparedRequest(i, "a b c d", 4, events) for i in range(requests)]
    records = []
    t0 = time.perf_counter()
    await drive(client, reqs, LoadPattern(concurrency=concurrency), records.append)
    wall = time.perf_counter() - t0
    await client.close()
    got = sum(len(r.chunk_times) for r in records)
    return wall, got, sum(r.status != "ok" for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="events per stream")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-c", PREBUILT_SERVER, str(args.events)], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            os.sched_setaffinity(server.pid, {cpus[1]})
            os.sched_setaffinity(0, {cpus[0]})
        import uvloop

        wall, got, failed = uvloop.run(client_run(port, args.concurrency, args.requests, args.events))
    finally:
        server.terminate()
        server.wait()
    print(
        f"{args.requests} streams x {args.events:,} events, {args.concurrency} at a time ({failed} failed); "
        f"client and server on separate CPUs"
    )
    print(f"  {got:,} events in {wall:.2f} s: {got / wall:,.0f} events/s   (target >= 50,000)")


if __name__ == "__main__":
    main()
