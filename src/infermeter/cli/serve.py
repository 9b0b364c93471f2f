"""`infermeter serve`: the emulator as an OpenAI-compatible server."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, emulator_settings
from infermeter.emulator.dialects import METRICS_DIALECTS
from infermeter.errors import UserError
from infermeter.event_loop import run_async


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)", parser=opt.host)] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one", parser=opt.integer(0, 65535))] = 8000,
    scheduler: opt.Scheduler = None,
    config: Annotated[
        Path | None, typer.Option(help="emulator config YAML/JSON", parser=opt.EMULATOR_CONFIG_FILE)
    ] = None,
    metrics_dialect: Annotated[
        str | None,
        typer.Option(
            help=f"/metrics in this engine's metric names: {', '.join(METRICS_DIALECTS)} (default: the config's, "
            "else vllm)",
            parser=opt.choice(*METRICS_DIALECTS),
        ),
    ] = None,
) -> None:
    """Run the emulator standalone: an OpenAI-compatible server over the engine model.

    It serves OpenAI completions, chat, Responses, embeddings and rerank, and TGI's, SGLang's and Triton's native
    generation APIs."""
    from infermeter.emulator.serving import serve as serve_forever

    emu = emulator_settings(config, scheduler)
    if metrics_dialect is not None:
        emu = emu.model_copy(update={"metrics_dialect": metrics_dialect})
    with contextlib.suppress(KeyboardInterrupt):
        try:
            run_async(serve_forever(emu, host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): choose another --host/--port"
            ) from None
