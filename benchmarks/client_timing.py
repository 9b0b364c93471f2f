"""How exactly the client stamps what a server wrote: receive time minus write time, per content event.

The server (tests/fake_server.py, its own process) writes events at known offsets and keeps time.perf_counter() just
before each write; the client stamps each event when the read holding its `data:` line returns (draft B.1.1).  Both
clocks are CLOCK_MONOTONIC.  The tests assert the median tightly and the tail relative to the machine's noise; this
prints the tail itself.  Target: p99 under 1 ms on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests/ package

from tests.fake_server import FakeServer

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.records import RunClock


async def measure(server: FakeServer, n: int) -> tuple[np.ndarray, np.ndarray]:
    clock = RunClock()
    client = OpenAIClient(ClientConfig(server.url, model="m"), clock)
    late, upload = [], []
    for k in range(n):
        rec = await client.send(PreparedRequest(k, f"timed b{k}", 3, 8), clock.now())
        truth = server.truth(f"b{k}")
        got = [t for t, c in zip(rec.chunk_times, rec.chunk_tokens, strict=True) if c > 0]
        late += list(np.asarray(got) - (np.asarray(truth["before"]) - clock.t0))
        upload.append(truth["received"][0] - clock.t0 - rec.submitted_at)
        await asyncio.sleep(0.005)
    await client.close()
    return np.asarray(late) * 1e3, np.asarray(upload) * 1e3


def describe(name: str, ms: np.ndarray) -> str:
    p50, p99 = np.percentile(ms, [50, 99])
    return f"{name} over {ms.size:,}: min {ms.min():.3f}  p50 {p50:.3f}  p99 {p99:.3f}  max {ms.max():.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="requests, 5 content events each")
    args = parser.parse_args()
    server = FakeServer()
    try:
        late, upload = asyncio.run(measure(server, args.requests))
    finally:
        server.close()
    print(describe("event receive - write time", late) + "   (target: p99 < 1 ms)")
    print(describe("server read - submitted_at", upload))


if __name__ == "__main__":
    main()
