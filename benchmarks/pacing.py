"""Open-loop pacing against the emulator: p99 of (submitted_at - scheduled_at) and the achieved send rate.

Targets at 500 requests/s: p99 lag under 5 ms, achieved rate within 2% of the target.  The emulator runs in its
own process on its own core (the client keeps the first); requests are tiny (16 prompt tokens, 4 output) so the
server is not the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio

import numpy as np

from infermeter.client import ClientConfig, OpenAIClient, PreparedRequest
from infermeter.emulator import EmulatorConfig, running_emulator
from infermeter.load import LoadPattern, drive
from infermeter.records import RunClock
from infermeter.tokenizers import REFERENCE, resolve_tokenizer
from infermeter.workload import ArrivalSpec, arrival_offsets
from infermeter.workload.prompts import ExactPrompter

PROMPTS = ExactPrompter(resolve_tokenizer(REFERENCE))  # exact lengths under cl100k_base, as the emulator counts


async def measure(url: str, rate: float, n: int, arrival: str) -> tuple[np.ndarray, np.ndarray, int]:
    client = OpenAIClient(ClientConfig(url, model="infermeter-emulator"), RunClock())
    reqs = [PreparedRequest(i, PROMPTS.build(16, i), 16, 4) for i in range(n)]
    offsets = arrival_offsets(ArrivalSpec(kind=arrival, rate=rate), n, 7)  # type: ignore[arg-type]
    records = []
    await drive(client, reqs, LoadPattern(offsets=offsets), records.append)
    await client.close()
    sched = np.array([r.scheduled_at for r in records])
    sub = np.array([r.submitted_at for r in records])
    return sched, sub, sum(r.status != "ok" for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--arrival", default="poisson", choices=["poisson", "constant"])
    args = parser.parse_args()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    with running_emulator(EmulatorConfig(prefix_caching=False), pin_cpus=True) as url:
        sched, sub, failed = runner(measure(url, args.rate, args.requests, args.arrival))
    lag_ms = (sub - sched) * 1000
    span = sub.max() - sub.min()
    achieved = (len(sub) - 1) / span
    planned = (len(sched) - 1) / (sched.max() - sched.min())
    print(f"open loop, {args.arrival} {args.rate:g} req/s, {args.requests} requests ({failed} failed)")
    print(
        f"  send lag (submitted_at - scheduled_at): p50 {np.percentile(lag_ms, 50):.2f} ms, "
        f"p99 {np.percentile(lag_ms, 99):.2f} ms, max {lag_ms.max():.2f} ms   (target p99 < 5 ms)"
    )
    print(
        f"  achieved send rate {achieved:.1f} req/s vs target {args.rate:g} "
        f"({100 * (achieved / args.rate - 1):+.2f}%; this draw of the process plans {planned:.1f})   (target +-2%)"
    )


if __name__ == "__main__":
    main()
