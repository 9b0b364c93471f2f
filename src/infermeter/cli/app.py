"""The `infermeter` typer app and what its commands share: running a coroutine, refusing to write over a run,
the target (a server or the embedded emulator), and the exit code a run ends with."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
import typer.main
from rich.console import Console

from infermeter import secrets
from infermeter.cli.lazy import LazyGroup
from infermeter.errors import ExitCode, Stopped, UserError

if TYPE_CHECKING:
    from infermeter.conduct.run import RunResult
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.load.target import Endpoint

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


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on uvloop when available (3-5x the SSE events/s of the default loop)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        import asyncio

        return asyncio.run(coro)
    return uvloop.run(coro)


def refuse_existing_run(out: Path) -> None:
    """Commands that write one run directory never write over another run."""
    from infermeter.records import holds_run

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file: give a directory for the run")
    if holds_run(out):
        raise UserError(f"--out {out} already holds a run: choose a new directory or remove that one")


def refuse_run_file(out: Path) -> None:
    """Commands that write one file never write over a file of a run directory."""
    from infermeter.records import JOURNAL, LEDGER, RECORDS, RUN_JSON, SUMMARY, holds_run

    if out.name in (RUN_JSON, RECORDS, JOURNAL, LEDGER, SUMMARY) and holds_run(out.parent):
        raise UserError(f"--out {out} is a file of the run in {out.parent}: choose another file")


@contextlib.contextmanager
def about(param: str) -> Iterator[None]:
    """A UserError raised in the block becomes a usage error naming the parameter, as click names a bad value."""
    try:
        yield
    except UserError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{param}'") from None


def api_key(env: str) -> None:
    """Register the key for redaction before anything can print it; a named variable must be set."""
    key = os.environ.get(env)
    if env != "OPENAI_API_KEY" and not key:
        raise UserError(f"--api-key-env {env}: the environment variable {env} is not set")
    secrets.register(key)


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


@contextlib.contextmanager
def target(url: str | None, emu: EmulatorConfig | None, backend: str = "openai") -> Iterator[Endpoint]:
    """Yield the endpoint (target, SUT declaration, HTTP base URL for /metrics): the given server, or the embedded
    emulator started for the block (with its gRPC front end as the target for --backend grpc; `emu` None: its
    defaults)."""
    from infermeter.load.target import Endpoint

    if url is not None:
        yield Endpoint(url, {}, url)
        return
    from infermeter.client.proxy import direct
    from infermeter.emulator.config import EmulatorConfig
    from infermeter.emulator.declaration import sut_declaration
    from infermeter.emulator.process import emulator_process

    if emu is None:
        emu = EmulatorConfig()
    if backend == "grpc":
        emu = emu.model_copy(update={"grpc_port": 0})
    err.print("starting the embedded emulator (no --url given)")
    with emulator_process(emu, pin_cpus=True) as process, direct(process.url):
        target = process.grpc_target if backend == "grpc" and process.grpc_target else process.url
        yield Endpoint(target, sut_declaration(emu), process.url)


def emulator_settings(path: Path | None, scheduler: str | None) -> EmulatorConfig:
    """The emulator's configuration from --config / --emulator-config, with --scheduler applied."""
    from infermeter.emulator.config import EmulatorConfig, load_emulator_config

    return (load_emulator_config(path) if path else EmulatorConfig()).with_scheduler(scheduler)
