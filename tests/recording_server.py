"""An OpenAI-compatible server on 127.0.0.1, in a thread of its own, that keeps every request body it is sent and
when it arrived: tests of what infermeter sends (dataset text verbatim, a session's history, shared prefixes, the
send times of a replayed trace).  Each reply is a few tokens that name the request, streamed as SSE."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

MODEL = "recorder"


@dataclass
class Seen:
    """What the server was sent: each body with its arrival on time.perf_counter()."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def chat_bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [b for b in self.bodies if "messages" in b]

    def completion_bodies(self) -> list[tuple[float, dict[str, Any]]]:
        with self.lock:
            return [(t, b) for t, b in zip(self.arrived, self.bodies, strict=True) if "prompt" in b]


def reply_text(body: dict[str, Any]) -> str:
    """The reply to a body: names how many messages it held, so a test can tell replies apart."""
    n = len(body.get("messages", [])) or 1
    return f" reply to {n} messages"


def _app(seen: Seen) -> web.Application:
    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def generate(request: web.Request) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = orjson.loads(await request.read())
        with seen.lock:
            seen.bodies.append(body)
            seen.arrived.append(arrived)
        chat = "messages" in body
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        words = reply_text(body).split(" ")[1:]
        for word in words[: max(1, int(body.get("max_tokens", 4)))]:
            piece = " " + word
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            await resp.write(b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n")
        usage = {"prompt_tokens": 1, "completion_tokens": len(words), "total_tokens": 1 + len(words)}
        await resp.write(b"data: " + orjson.dumps({"choices": [], "usage": usage}) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", generate)
    app.router.add_post("/v1/completions", generate)
    return app


@contextmanager
def recording_server() -> Iterator[tuple[str, Seen]]:
    """The server's base URL and what it sees, for the length of the block."""
    seen = Seen()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(_app(seen))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box["runner"] = runner
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the recording server did not start within 10 s")
    try:
        yield f"http://127.0.0.1:{box['port']}", seen
    finally:
        asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
