"""An aiohttp application served on 127.0.0.1 at a free port for the length of an `async with`: the small fake
servers tests write to answer one kind of request."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def serving(app: web.Application, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    """`app` on 127.0.0.1 (over TLS with `tls`); yields its base URL and stops it on exit."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
