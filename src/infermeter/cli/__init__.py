"""The `infermeter` command: one typer app, a module per command group, each command a thin call into the package
that does the work.  `main` imports a command's module only when the command runs (cli.lazy); `app` is the typer app
with every command registered, for whatever inspects them all."""

import importlib
from typing import Any

from infermeter.cli.main import main

__all__ = ["app", "main"]
del globals()["app"]  # the submodule main imported: `app` is the typer app, every command registered (below)


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module 'infermeter.cli' has no attribute {name!r}")
    from infermeter.cli.lazy import MODULES

    for module in MODULES:
        importlib.import_module(f"infermeter.cli.{module}")
    from infermeter.cli.app import app

    globals()["app"] = app
    return app
