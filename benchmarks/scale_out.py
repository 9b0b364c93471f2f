"""Scale-out: the request rate and token events/s that `infermeter run` achieves from one process and from 1 and 2
dask workers (--workers), against a server streaming pre-built events on its own core, at an offered load above
one process's ceiling.

The server (pinned to the last CPU) answers every request with --events completion events in one write, then
[DONE]: it costs little per request, so the client side is what is measured.  The client side (the coordinator and
its workers) is pinned to the other CPUs (`--client-cpus rest`, the default) or left to every CPU (`all`, sharing
the server's).  Figures come from each run's records: sends per second over the send window, completed requests
and token events per second from the first send to the last event, and the send lag's p50 / p99.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

SERVER = r"""
import asyncio, sys
from aiohttp import web
N = int(sys.argv[1])
EVENT = (b'data: {"id":"cmpl-1","object":"text_completion","created":0,"model":"m",'
         b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}]}\n\n')
BODY = EVENT * N + (b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":16,"completion_tokens":%d}}\n\n'
                    b'data: [DONE]\n\n' % N)
async def handle(request):
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(BODY)
    return resp
async def models(request):
    return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
async def main():
    app = web.Application(); app.router.add_post("/v1/completions", handle); app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None); await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096); await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()
import uvloop; uvloop.run(main())
"""


def one_run(port: int, workers: int | None, rate: float, n: int, events: int, cpus: set[int], out: Path) -> list[str]:
    cmd = [
        sys.executable, "-m", "infermeter", "run", "--url", f"http://127.0.0.1:{port}", "--model", "m",
        "--rate", str(rate), "--arrival", "constant", "--requests", str(n), "--input-tokens", "16",
        "--output-tokens", str(events), "--warmup", "off", "--scrape-interval", "0", "--telemetry-interval", "0",
        "--tokenizer", "cl100k_base", "--no-progress", "--out", str(out),
    ]  # fmt: skip
    if workers is not None:
        cmd += ["--workers", str(workers)]
    p = subprocess.run(
        cmd, capture_output=True, text=True, preexec_fn=lambda: os.sched_setaffinity(0, cpus), check=False
    )
    if p.returncode != 0:
        raise SystemExit(f"run failed ({p.returncode}): {p.stderr[-2000:]}")
    t = pq.read_table(out / "records.parquet", columns=["scheduled_at", "submitted_at", "chunk_times", "status"])
    sub = t.column("submitted_at").to_numpy()
    lag = (sub - t.column("scheduled_at").to_numpy()) * 1000
    ends = np.array([c[-1] if c else np.nan for c in t.column("chunk_times").to_pylist()])
    ok = np.asarray(t.column("status").to_pylist()) == "ok"
    events_got = sum(len(c) for c in t.column("chunk_times").to_pylist())
    span = np.nanmax(ends) - sub.min()
    send_window = sub.max() - sub.min()
    label = "one process" if workers is None else f"{workers} worker{'s' if workers > 1 else ''}"
    return [
        label,
        f"{len(sub) / send_window:,.0f}",
        f"{ok.sum() / span:,.0f}",
        f"{events_got / span:,.0f}",
        f"{np.percentile(lag, 50):.1f} / {np.percentile(lag, 99):.1f}",
        f"{(~ok).sum()}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=2500.0, help="offered requests/s (constant arrivals)")
    parser.add_argument("--seconds", type=float, default=4.0, help="length of the offered load")
    parser.add_argument("--events", type=int, default=32, help="token events per request")
    parser.add_argument("--client-cpus", choices=("rest", "all"), default="rest")
    args = parser.parse_args()
    n = int(args.rate * args.seconds)
    cpus = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.events)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        client_cpus = set(cpus)
        if len(cpus) >= 2:
            os.sched_setaffinity(server.pid, {cpus[-1]})
            if args.client_cpus == "rest":
                client_cpus = set(cpus[:-1])
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for workers in (None, 1, 2):
                rows.append(one_run(port, workers, args.rate, n, args.events, client_cpus, Path(tmp) / str(workers)))
    finally:
        server.terminate()
        server.wait()
    print(
        f"offered {args.rate:,.0f} req/s constant for {args.seconds:g} s ({n:,} requests x {args.events} events); "
        f"server on CPU {cpus[-1]}, client on CPU(s) {sorted(client_cpus)}"
    )
    header = ["sender", "sent/s", "completed req/s", "token events/s", "send lag p50/p99 ms", "failed"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for line in [header, *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
    base = float(rows[1][3].replace(",", ""))
    print(f"token events/s, 2 workers / 1 worker: {float(rows[2][3].replace(',', '')) / base:.2f}x")


if __name__ == "__main__":
    main()
