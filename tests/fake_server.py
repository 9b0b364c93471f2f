"""A test server that streams SSE at exactly known times and fails on request, in its own process.

The first word of the prompt picks the behaviour, the second names the request; for every event the server keeps
time.perf_counter() just before and just after writing it, and serves them at GET /truth/NAME.  perf_counter is
CLOCK_MONOTONIC, one clock for every process on the machine, so tests hold the client's timestamps against these.
The server runs in a separate process: a thread in the test process would share its GIL, and a server stamp taken
after a write could then lag the client's receipt of the same bytes by a whole GIL switch interval (5 ms).

Run as `python -m tests.fake_server`; it prints "listening on PORT".
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
from aiohttp import web

# offsets (s) after the request arrives: an empty event, a whitespace-only one, then content; the event at 0.09
# carries two tokens (usage counts them)
TIMED = [
    (0.010, "", 0),
    (0.020, " ", 0),
    (0.050, " a", 1),
    (0.060, " b", 1),
    (0.075, " c", 1),
    (0.090, " d e", 2),
    (0.130, " f", 1),
]
ROOT = Path(__file__).resolve().parent.parent
# the last event of a 5-token stream as llama-server (tools/server/server-task.cpp) and vLLM send it
SERVER_TIMING_FINAL = {
    "llamacpp": {
        "choices": [{"text": "", "index": 0, "logprobs": None, "finish_reason": "length"}],
        "object": "text_completion",
        "usage": {"completion_tokens": 5, "prompt_tokens": 16, "total_tokens": 21},
        "timings": {
            "cache_n": 12,
            "prompt_n": 4,
            "prompt_ms": 38.5,
            "prompt_per_token_ms": 9.625,
            "prompt_per_second": 103.896,
            "predicted_n": 5,
            "predicted_ms": 61.25,
            "predicted_per_token_ms": 12.25,
            "predicted_per_second": 81.633,
        },
    },
    "vllmcached": {
        "choices": [],
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": 5,
            "total_tokens": 45,
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    },
}


class FakeServer:
    """The server process, seen from a test: its URL, the truth it kept, and how to stop it."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fake_server"], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"the fake server did not start: {line!r}")
        self.port = int(line.split()[-1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def truth(self, name: str) -> dict[str, list[float]]:
        """{"before": [...], "after": [...], "received": [t]}: write times of the content events of request NAME."""
        with urllib.request.urlopen(f"{self.url}/truth/{name}", timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    async def raw_timed(self, name: str) -> tuple[float, list[float]]:
        """A "timed" request over a bare socket: when its last byte was written, and when each content event arrived.

        This is the floor the machine sets for the path infermeter's client takes (loopback, a wake-up in each
        process, the server's HTTP parsing), measured beside the client so tests can hold the client to what it adds.
        """
        body = orjson.dumps({"model": "m", "prompt": f"timed {name}", "stream": True})
        head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(head.encode() + body)
        sent = time.perf_counter()
        await writer.drain()
        buf, arrived = b"", []
        while data := await reader.read(65536):
            now = time.perf_counter()
            buf += data
            arrived += [now] * (buf.count(b"\n\n") - len(arrived))
        writer.close()
        content = [t for t, (_, _, n) in zip(arrived, TIMED, strict=False) if n > 0]
        return sent, content


class _Handler:
    def __init__(self) -> None:
        self.truth: dict[str, dict[str, list[float]]] = {}

    async def get_truth(self, request: web.Request) -> web.Response:
        return web.json_response(self.truth.get(request.match_info["name"], {}))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        t0 = time.perf_counter()
        mode, key = ([*body["prompt"].split(), "", ""])[:2]
        stamps: dict[str, list[float]] = {"received": [t0], "before": [], "after": []}
        self.truth[key] = stamps
        if mode == "http500":
            return web.Response(status=500, text="boom: the model is overloaded")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def event(text: str, usage: int | None = None, timed: bool = False) -> None:
            obj: dict = {"choices": [{"index": 0, "text": text}]}
            if usage is not None:
                obj["usage"] = {"completion_tokens": usage, "prompt_tokens": 3}
            if timed:
                stamps["before"].append(time.perf_counter())
            await resp.write(b"data: " + orjson.dumps(obj) + b"\n\n")
            if timed:
                stamps["after"].append(time.perf_counter())

        async def at(offset: float) -> None:
            await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))

        if mode == "timed":
            total = 0
            for offset, text, n in TIMED:
                await at(offset)
                total += n
                await event(text, total, timed=n > 0)
            await resp.write(b"data: [DONE]\n\n")
        elif mode == "servertimes":
            # server times on a reference 30 ms before this request arrived, as a server behind a queue would count
            ref = t0 - 0.030
            start = time.perf_counter() - ref
            for k in range(4):
                await at(0.010 * (k + 1))
                await event(f" t{k}", k + 1, timed=True)
            offsets = [round(t - ref, 6) for t in stamps["before"]]
            extra = {"server_token_times": offsets, "response_start": round(start, 6)}
            await resp.write(b"data: " + orjson.dumps({"choices": [], "infermeter": extra}) + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
        elif mode in ("llamacpp", "vllmcached"):
            for k in range(5):
                await event(f" t{k}")
            await resp.write(b"data: " + orjson.dumps(SERVER_TIMING_FINAL[mode]) + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
        elif mode == "reset":
            await event(" a")
            await event(" b")
            await asyncio.sleep(0.01)
            assert request.transport is not None
            request.transport.abort()
        elif mode == "malformed":
            await event(" a")
            await resp.write(b"this is not sse\n\n")
        elif mode == "nodone":
            await event(" a")
            await event(" b")
        elif mode in ("finalnodone", "usagenodone"):  # how `transformers serve` ends a stream: no [DONE]
            await event(" a")
            await event(" b")
            if mode == "finalnodone":
                await resp.write(b'data: {"choices": [{"index": 0, "text": "", "finish_reason": "length"}]}\n\n')
            else:
                await resp.write(b'data: {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 3}}\n\n')
        elif mode == "nonjson":
            await event(" a")
            await resp.write(b"data: {not json\n\n")
        elif mode == "errorevent":
            await resp.write(b'data: {"error": {"message": "out of memory"}}\n\n')
        elif mode == "slowfirst":
            await at(2.0)
            await event(" late")
            await resp.write(b"data: [DONE]\n\n")
        elif mode == "slowtotal":
            for k in range(20):
                await at(0.1 * k)
                await event(f" t{k}", timed=True)
            await resp.write(b"data: [DONE]\n\n")
        else:  # ok
            for k in range(5):
                await event(f" t{k}")
            await resp.write(b"data: [DONE]\n\n")
        return resp


async def _main() -> None:
    handler = _Handler()
    app = web.Application()
    app.router.add_post("/v1/completions", handler.handle)
    app.router.add_get("/truth/{name}", handler.get_truth)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"listening on {port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
