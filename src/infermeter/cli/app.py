"""The `infermeter` typer app and what its commands share: running a coroutine, a UserError as a usage error, the
embedded emulator's settings, refusing to write over a run's or a suite's file, and the exit code a run ends with.
(The target, the API key and the refusal of a directory holding a run are the Python API's, python_api.endpoint and
python_api.preflight: both sides share them.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer
import typer.main
from rich.console import Console

from infermeter.cli.lazy import LazyGroup
from infermeter.errors import ExitCode, Stopped, UserError

if TYPE_CHECKING:
    from infermeter.conduct.run import RunResult
    from infermeter.emulator.config import EmulatorConfig

T = TypeVar("T")

app = typer.Typer(
    cls=LazyGroup,  # a command's module loads when the command runs (cli.lazy)
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Benchmark LLM inference servers: exact latency metrics, user-experience scores, an engine wind tunnel.",
)
LazyGroup.typer_app = app


def command_group() -> LazyGroup:
    """The click group `infermeter` runs: what typer makes of the app, every command listed, none imported."""
    group = typer.main.get_group(app)
    assert isinstance(group, LazyGroup)
    return group


err = Console(stderr=True)


def refuse_run_file(out: Path) -> None:
    """Commands that write one file where --out says never write over a run's or a suite's file (the guard is
    config.checks.refuse_results_file, which every such write shares)."""
    from infermeter.config.checks import refuse_results_file

    refuse_results_file(out, f"--out {out}")


@contextlib.contextmanager
def about(param: str) -> Iterator[None]:
    """A UserError raised in the block becomes a usage error naming the parameter, as click names a bad value."""
    try:
        yield
    except UserError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{param}'") from None


def finish_run(result: RunResult) -> None:
    """Exit with the code that says how the run ended (README, "Exit codes")."""
    from infermeter.load.stopping import WORKER_LOST

    if result.disk_failure is not None:
        raise Stopped(
            f"{result.disk_failure}: the run stopped early; what was recorded is in {result.run_dir} "
            f"(infermeter report {result.run_dir} reads it)",
            ExitCode.INCOMPLETE,
        )
    if result.stopped == "interrupted":
        raise Stopped(f"interrupted: what was measured is in {result.run_dir}", ExitCode.INTERRUPTED)
    if result.stopped == WORKER_LOST:
        raise Stopped(
            f"{WORKER_LOST}: its requests not sent are listed in run.json (distributed.workers); what was measured is "
            f"in {result.run_dir}",
            ExitCode.INCOMPLETE,
        )
    if result.stopped == "terminated":
        raise Stopped(f"terminated (SIGTERM): what was measured is in {result.run_dir}", ExitCode.TERMINATED)
    r = result.summary.requests
    if r.total and not r.ok:
        top = next(iter(r.failures_by_reason), "unknown")
        raise Stopped(
            f"no request succeeded: {r.failed} of {r.total} failed (most often: {top}){_field_hint(result.run_dir)}; "
            f"see infermeter report {result.run_dir}",
            ExitCode.NO_SUCCESS,
        )


def _field_hint(run_dir: Path) -> str:
    """The hint a failure carries when the server rejected a field infermeter sent (which option sends it)."""
    from infermeter.client.reasons import REJECTED_FIELD
    from infermeter.metrics import RecordColumns

    try:
        errors = RecordColumns.of_run(run_dir).error
    except (UserError, OSError):
        return ""
    for error in errors:
        at = error.find(REJECTED_FIELD)
        if at >= 0:
            return ": " + error[at:].rstrip(")")
    return ""


def emulator_settings(path: Path | None, scheduler: str | None) -> EmulatorConfig:
    """The emulator's configuration from --config / --emulator-config, with --scheduler applied."""
    from infermeter.emulator.config import EmulatorConfig, load_emulator_config

    return (load_emulator_config(path) if path else EmulatorConfig()).with_scheduler(scheduler)
