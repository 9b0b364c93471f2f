"""How many streamed requests per second the embedded emulator serves on one core, and how close to its own schedule
its tokens leave (target, issue 15: >= 2,000 req/s of 32 tokens with token lateness p99 <= 1 ms).

The emulator (its own process, pinned to CPU 1) runs an engine fast enough not to be the limit itself: steps of
--step-ms (5 ms by default) holding every running stream's next token, no prefix cache.  A lean load generator (this
process, CPU 0: raw asyncio protocols that count events without parsing them, so it is not the bottleneck) sends
constant arrivals of 16-token prompts asking for 32 tokens.  Prints the completed requests per second, the
emulator's CPU share, and its own lateness figures from /metrics (infermeter:token_lateness_seconds, tokens over 1 ms
late, timeline resets).  Every token of a step is due at the step's end and each is one write to its own connection,
so the last token of a step is late by (tokens in the step) x (one write): the step time sets the lateness floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import uvloop

from infermeter.emulator import EmulatorConfig, emulator_process
from infermeter.engine.config import EngineConfig


def engine(step_s: float) -> EngineConfig:
    """Decodes and new prompts in every step (chunked prefill with a budget that never binds), each step `step_s`:
    a scheduler that gives prompts steps of their own (vLLM v0's) starves decodes under steady arrivals and then
    hands out hundreds of tokens in one step, which measures that scheduler rather than the emulator."""
    return EngineConfig.model_validate({
        "scheduler": {"name": "chunked_prefill", "max_num_seqs": 4096, "token_budget": 1 << 20},
        "iteration_model": {
            "fixed": step_s, "per_prefill_token": 1e-8, "per_decode_seq": 1e-8, "per_context_token": 0.0
        },
    })  # fmt: skip


class Stream(asyncio.Protocol):
    """A kept-alive connection that sends one request at a time and counts its reply's events."""

    def __init__(self, pool: list[Stream], done: list[int]) -> None:
        self.pool, self.done = pool, done
        self.transport: asyncio.Transport | None = None
        self.tail = b""
        self.events = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.events += data.count(b"data: ")
        self.tail = (self.tail + data)[-7:]
        if self.tail.endswith(b"\r\n0\r\n\r\n"):
            self.done.append(self.events - 2)  # the final event and [DONE] carry no token
            self.events, self.tail = 0, b""
            self.pool.append(self)


def request_bytes(host: str, n: int) -> bytes:
    body = b'{"model":"infermeter-emulator","prompt":"%s","max_tokens":32,"stream":true,"ignore_eos":true}' % (
        b" ".join(b"w%d" % (n * 16 + k) for k in range(16))
    )
    head = b"POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n" % host.encode()
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


async def load(url: str, rate: float, seconds: float) -> tuple[int, int, float, int, float]:
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    pool: list[Stream] = []
    done: list[int] = []
    n = int(rate * seconds)
    t0 = time.perf_counter() + 0.1
    for k in range(n):
        delay = t0 + k / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if pool:
            conn = pool.pop()
        else:
            _, conn = await loop.create_connection(lambda: Stream(pool, done), parts.hostname, parts.port)
        assert conn.transport is not None
        conn.transport.write(request_bytes(parts.netloc, k))
    sent_end = time.perf_counter()
    deadline = sent_end + 10
    while len(done) < n and time.perf_counter() < deadline:
        await asyncio.sleep(0.001)
    return n, len(done), time.perf_counter() - sent_end, sum(done), sent_end - t0


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for m in re.finditer(
        r'^(infermeter:[a-z_]+?)(?:_bucket\{le="([^"]+)",[^}]*\}|\{[^}]*\}) ([0-9.e+-]+)$', text, re.M
    ):
        out[m.group(1) + (f"@{m.group(2)}" if m.group(2) else "")] = float(m.group(3))
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="1000,2000", help="comma-separated req/s")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--step-ms", type=float, default=5.0, help="the engine's step time (its inter-token latency)")
    args = parser.parse_args()
    print(
        f"emulator on CPU 1, load generator on CPU 0; 16-token prompts, 32 tokens each, constant arrivals; "
        f"{args.step_ms:g} ms steps"
    )
    for rate in (float(r) for r in args.rates.split(",")):
        with emulator_process(
            EmulatorConfig(engine=engine(args.step_ms / 1e3), prefix_caching=False), pin_cpus=True
        ) as emu:
            url, pid = emu.url, emu.process.pid
            before, cpu0 = scrape(url), cpu_seconds(pid)
            sent, finished, tail, tokens, send_s = uvloop.run(load(url, rate, args.seconds))
            wall = send_s + tail
            after, cpu1 = scrape(url), cpu_seconds(pid)
        d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
        count = d.get("infermeter:token_lateness_seconds@+Inf", 0.0)
        bounds = sorted(
            (float(k.split("@")[1]), v) for k, v in d.items() if "lateness_seconds@" in k and "+Inf" not in k
        )
        p50, p99 = (next((b for b, c in bounds if count and c / count >= q), float("inf")) for q in (0.5, 0.99))
        late = d.get("infermeter:tokens_late_total", 0.0)
        print(
            f"{rate:6g} req/s offered ({sent / send_s:.0f} sent): {finished}/{sent} finished, the last "
            f"{tail * 1e3:.0f} ms after the last send ({tokens / wall:,.0f} tok/s); emulator CPU "
            f"{(cpu1 - cpu0) / wall:.0%} of a core; token lateness "
            f"p50 <= {p50 * 1e3:g} ms, p99 <= {p99 * 1e3:g} ms, {late / max(count, 1):.2%} over 1 ms, "
            f"{d.get('infermeter:timeline_resets_total', 0.0):.0f} timeline resets"
        )


if __name__ == "__main__":
    main()
