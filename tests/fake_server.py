"""A test server in a background thread that streams SSE at exactly known times and fails on request.

The first word of the prompt picks the behaviour; every event's write time (time.perf_counter) is kept so
tests can hold the client's timestamps against the truth.
"""

from __future__ import annotations

import asyncio
import threading
import time

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


class FakeServer:
    def __init__(self) -> None:
        self.truth: dict[str, list[float]] = {}
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/v1/completions", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        async def stop() -> None:
            await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        t0 = time.perf_counter()
        mode, key = ([*body["prompt"].split(), "", ""])[:2]
        if mode == "http500":
            return web.Response(status=500, text="boom: the model is overloaded")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def event(text: str, usage: int | None = None) -> None:
            obj: dict = {"choices": [{"index": 0, "text": text}]}
            if usage is not None:
                obj["usage"] = {"completion_tokens": usage, "prompt_tokens": 3}
            await resp.write(b"data: " + orjson.dumps(obj) + b"\n\n")

        async def at(offset: float) -> None:
            await asyncio.sleep(max(0.0, t0 + offset - time.perf_counter()))

        if mode == "timed":
            times, total = [], 0
            for offset, text, n in TIMED:
                await at(offset)
                total += n
                await event(text, total)
                if n:
                    times.append(time.perf_counter())
            self.truth[key] = times
            await resp.write(b"data: [DONE]\n\n")
        elif mode == "servertimes":
            # server times on a reference 30 ms before this request arrived, as a server behind a queue would count
            ref = t0 - 0.030
            start, times = time.perf_counter() - ref, []
            for k in range(4):
                await at(0.010 * (k + 1))
                await event(f" t{k}", k + 1)
                times.append(time.perf_counter())
            self.truth[key] = times
            offsets = [round(t - ref, 6) for t in times]
            extra = {"server_token_times": offsets, "response_start": round(start, 6)}
            await resp.write(b"data: " + orjson.dumps({"choices": [], "infermeter": extra}) + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
        elif mode == "reset":
            await event(" a")
            await event(" b")
            await asyncio.sleep(0.01)
            request.transport.abort()
        elif mode == "malformed":
            await event(" a")
            await resp.write(b"this is not sse\n\n")
        elif mode == "nodone":
            await event(" a")
            await event(" b")
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
                await event(f" t{k}")
            await resp.write(b"data: [DONE]\n\n")
        else:  # ok
            for k in range(5):
                await event(f" t{k}")
            await resp.write(b"data: [DONE]\n\n")
        return resp
