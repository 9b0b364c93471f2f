"""A stand-in DCGM exporter on 127.0.0.1: serves a recorded exposition (tests/fixtures/dcgm) whose total-energy
counter advances a fixed step per GPU at every scrape, or a status code of the test's choosing."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dcgm"
STEP_MJ = {"0": 50_000, "1": 30_000}  # per scrape: 50 J on GPU 0, 30 J on GPU 1
_ENERGY = re.compile(r'^(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\{gpu="(\d+)".*\}) (\d+)$', re.MULTILINE)
_POWER = re.compile(r"^(DCGM_FI_DEV_POWER_USAGE\{.*\}) \S+$", re.MULTILINE)


def exposition(fixture: str, scrape: int, power_w: float | None = None) -> str:
    """The fixture as the exporter writes it at its `scrape`-th answer (0 first): each counter `scrape` steps on;
    every GPU's power reading `power_w` where given."""
    text = (FIXTURES / fixture).read_text()
    if power_w is not None:
        text = _POWER.sub(lambda m: f"{m[1]} {power_w}", text)
    return _ENERGY.sub(lambda m: f"{m[1]} {int(m[3]) + scrape * STEP_MJ[m[2]]}", text)


@dataclass
class Exporter:
    url: str
    served: int = 0  # answers given with the fixture

    def energy_j(self) -> float:
        """Joules the counters advanced between the first and the last answer, over both GPUs."""
        return (self.served - 1) * sum(STEP_MJ.values()) / 1000.0


@contextmanager
def dcgm_exporter(fixture: str = "h100x2.txt", status: int = 200, body: str | None = None) -> Iterator[Exporter]:
    """A running exporter at `.url` (its /metrics) until the block ends."""
    loop = asyncio.new_event_loop()
    exporter = Exporter("")

    async def metrics(_: web.Request) -> web.Response:
        if status != 200:
            return web.Response(status=status, text="404 page not found\n")
        if body is not None:
            return web.Response(text=body)
        text = exposition(fixture, exporter.served)
        exporter.served += 1
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    exporter.url = f"http://127.0.0.1:{port}/metrics"
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield exporter
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
