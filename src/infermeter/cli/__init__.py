"""The `infermeter` command: one typer app, a module per command group, each command a thin call into the package
that does the work.  `main` imports a command's module only when the command runs (cli.lazy); `app` is the typer app
with every command registered, for whatever inspects them all."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from infermeter.cli.main import main

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]
del globals()["app"]  # the submodule main imported: `app` is the typer app, every command registered (below)


def __getattr__(name: str) -> typer.Typer:
    if name != "app":
        raise AttributeError(f"module 'infermeter.cli' has no attribute {name!r}")
    from infermeter.cli.lazy import modules

    for module in modules():
        importlib.import_module(f"infermeter.cli.{module}")
    from infermeter.cli.app import app

    globals()["app"] = app
    return app
