"""`infermeter serve`: the emulator as an OpenAI-compatible server."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, emulator_settings, run_async
from infermeter.errors import UserError


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)", parser=opt.host)] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one", parser=opt.integer(0, 65535))] = 8000,
    scheduler: opt.Scheduler = None,
    config: Annotated[
        Path | None, typer.Option(help="emulator config YAML/JSON", parser=opt.EMULATOR_CONFIG_FILE)
    ] = None,
) -> None:
    """Run the emulator standalone: an OpenAI-compatible server over the engine model."""
    from infermeter.emulator.serving import serve as serve_forever

    emu = emulator_settings(config, scheduler)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            run_async(serve_forever(emu, host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): choose another --host/--port"
            ) from None
