"""What a run, simulation or suite checks before anything is measured or written: the API key's variable, and an
output directory that would write over a run; each message names the option as its caller gave it (the command
line's `--out DIR`, the Python API's `out='DIR'`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from infermeter import secrets
from infermeter.config.sections import Target
from infermeter.errors import UserError

Voice = Literal["command", "api"]  # whom a message speaks to: a command line's user, or a Python caller


def option_text(name: str, value: object, voice: Voice = "command") -> str:
    """An option with its value, as the caller gave it: `--api-key-env KEY` on the command line, `api_key_env='KEY'`
    from Python."""
    if voice == "api":
        shown = os.fspath(value) if isinstance(value, os.PathLike) else value
        return f"{name}={shown!r}"
    return f"--{name.replace('_', '-')} {value}"


def api_key(env: str, voice: Voice = "command") -> None:
    """Register the key for redaction before anything can print it; a variable the user named must be set."""
    key = os.environ.get(env)
    if env != Target.model_fields["api_key_env"].default and not key:  # the default variable may be unset
        raise UserError(f"{option_text('api_key_env', env, voice)}: the environment variable {env} is not set")
    secrets.register(key)


def refuse_existing_run(out: Path, voice: Voice = "command") -> None:
    """A command that writes one run directory never writes over another run (nor into a file)."""
    from infermeter.records import holds_run

    if out.exists() and not out.is_dir():
        raise UserError(f"{option_text('out', out, voice)} is a file: give a directory for the run")
    if holds_run(out):
        raise UserError(
            f"{option_text('out', out, voice)} already holds a run: choose a new directory or remove that one"
        )


def refuse_running_loop(function: str) -> None:
    """A function that runs event loops of its own cannot start inside a running one (Jupyter, an async program):
    a UserError naming the coroutine to await instead."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise UserError(
        f"{function}() runs event loops of its own and this thread is running one (Jupyter, an async program): "
        f"use `await infermeter.{function}_async(...)` instead"
    )
