"""The `infermeter` command: one typer app, a module per command group, each command a thin call into the package
that does the work."""

from infermeter.cli import calibrate, compare, predict, report, run, serve, sim, test, workload  # noqa: F401  (each registers its commands)
from infermeter.cli.app import app
from infermeter.cli.main import main

__all__ = ["app", "main"]
