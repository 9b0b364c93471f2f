"""The emulator's process: the HTTP listener (the lean front end with aiohttp behind it, or aiohttp alone), gRPC when
configured, the signals that stop it, and a graceful stop (idle connections closed, streams let finish)."""

from __future__ import annotations

import asyncio
import contextlib
import signal

from aiohttp import web

from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.lean_http import Fronts, start_lean
from infermeter.emulator.process import ANNOUNCE, GRPC_ANNOUNCE
from infermeter.emulator.routes import application
from infermeter.emulator.server import Emulator
from infermeter.process_limits import raise_open_files_limit

SHUTDOWN_S = 60.0  # how long a stopping server lets its streams finish (aiohttp's default)


async def serve(config: EmulatorConfig, host: str = "127.0.0.1", port: int = 8000, announce: bool = True) -> None:
    """Run until SIGINT or SIGTERM (or cancellation), then close cleanly; prints the bound URL first (port 0 picks
    a free port)."""
    raise_open_files_limit()  # one socket per queued request
    emulator = Emulator(config)
    runner = web.AppRunner(application(emulator), access_log=None, handle_signals=False, shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    grpc_server = None
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    # started with SIGINT ignored (embedded in a benchmark, which stops it with SIGTERM), a terminal's Ctrl-C to the
    # whole process group leaves it serving the requests the benchmark lets finish
    keep_ignoring = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    for sig in (signal.SIGTERM,) if keep_ignoring else (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, done.set)
    lean: asyncio.AbstractServer | None = None
    fronts = Fronts()  # the lean front end's connections, closed at the stop
    try:
        if emulator.lean and runner.server is not None:  # streams by the lean front end, the rest by aiohttp
            lean = await start_lean(emulator, runner.server, fronts, host, port)
            bound = lean.sockets[0].getsockname()[1]
        else:
            site = web.TCPSite(runner, host, port, backlog=4096)
            await site.start()
            bound = runner.addresses[0][1]
        also = ""
        if config.grpc_port is not None:
            from infermeter.emulator.grpc_server import start_grpc

            grpc_server, grpc_bound = await start_grpc(emulator, host, config.grpc_port)
            also = f" ({GRPC_ANNOUNCE}{host}:{grpc_bound})"
        if announce:  # one line: whoever waits for it reads both addresses at once
            print(f"{ANNOUNCE}http://{host}:{bound}{also}", flush=True)
        await done.wait()
    finally:
        if lean is not None:
            lean.close()
            if runner.server is not None:
                runner.server.pre_shutdown()  # the connections handed to aiohttp: the idle ones close now
            await fronts.close(SHUTDOWN_S)
        if grpc_server is not None:
            await grpc_server.stop(grace=None)
        await runner.cleanup()
