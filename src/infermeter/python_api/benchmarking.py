"""`benchmark`: one run against a server, or the embedded emulator, as `infermeter run` makes it; the command and the
Python API share every step here (the configuration from its sources, the requests drawn before anything starts,
the target, the measured load, the exports), and differ only in what they print."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.config.run import RunConfig
from infermeter.config.sections import SECTIONS
from infermeter.exports.spec import ExportSpec
from infermeter.python_api.options import Fields, emulator_options, given_from, output_path
from infermeter.python_api.preflight import Voice, refuse_running_loop

if TYPE_CHECKING:
    from infermeter.conduct.run import RunResult
    from infermeter.config.section import Given
    from infermeter.load.plan import Work
    from infermeter.python_api.endpoint import Announce
    from infermeter.python_api.run_handle import Run

__all__ = ["RUN_FIELDS", "RunConfig", "benchmark", "benchmark_async"]

RUN_FIELDS = tuple(Fields(key, section) for key, section in SECTIONS.items())  # every field of every run section
OWN = ("out", "progress", "report", "emulator_config", "scheduler", "export")  # benchmark's parameters besides them


def run_configuration(
    source: RunConfig | str | PathLike[str] | None,
    given: Given,
    emulator_config: Path | None = None,
    scheduler: str | None = None,
) -> RunConfig:
    """The run's configuration: `source` (a RunConfig, or a scenario file or run directory as --config takes it) with
    the options given laid over it key by key; --emulator-config and --scheduler configure the embedded emulator."""
    from infermeter.config.scenario import merged, run_config

    if source is None or not isinstance(source, RunConfig):
        return run_config(Path(source) if source is not None else None, given, emulator_config, scheduler)
    base = source.model_dump(mode="json")
    url_given = "url" in given.get("target", {})
    if url_given:
        base.pop("emulator")  # a URL given drops the emulator the configuration described, as a scenario file's
    if url_given or base["target"]["url"] is None:
        base["target"].pop("url")  # run_config drops the emulator whenever its values hold a url
    data = {k: v for k, v in merged(base, given).items() if v is not None}  # no emulator: the key left out
    return run_config(None, data, emulator_config, scheduler)


@dataclass(frozen=True)
class Prepared:
    """A run ready to measure: its resolved configuration (what run.json keeps), its requests drawn, and the
    directory it writes."""

    config: RunConfig
    work: Work
    out: Path


def prepare(config: RunConfig, out: Path | None, voice: Voice = "command") -> Prepared:
    """Everything checked before anything starts: the API key's variable, the workload (read once, its requests drawn:
    a bad workload costs nothing), the output directory (default runs/run-YYYYmmdd-HHMMSS); `voice`: whom the
    messages name options for (the command line, or a Python caller)."""
    from infermeter.load.plan import Work
    from infermeter.python_api.preflight import api_key, refuse_existing_run
    from infermeter.workload.source import WorkloadSource

    api_key(config.target.api_key_env, voice)
    source = WorkloadSource.read(config.workload)  # a trace, a dataset or a workload file, read once for the run
    config = config.resolved(source.size() if source.trace is not None else None, source.timed)
    work = Work.draw(config, source)
    run_dir = out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    refuse_existing_run(run_dir, voice)
    return Prepared(config, work, run_dir)


def measure(prepared: Prepared, progress: bool, announce: Announce | None = None) -> RunResult:
    """The run measured on an event loop of its own (uvloop): the target started, the load sent, the directory
    written.  `announce` (a callable taking a line) says when the embedded emulator starts."""
    from infermeter.conduct.run import conduct
    from infermeter.event_loop import run_async
    from infermeter.python_api.endpoint import serving

    cfg = prepared.config
    with serving(cfg.target.url, cfg.emulator, cfg.target.backend, announce) as endpoint:
        result: RunResult = run_async(conduct(cfg, endpoint, prepared.out, progress, prepared.work))
    return result


async def measure_async(prepared: Prepared, progress: bool, announce: Announce | None = None) -> RunResult:
    """`measure` on the caller's running loop.  The embedded emulator starts in this thread (under a second, the loop
    held meanwhile): it is tied to the thread that starts it, and this thread gets the CPU the emulator leaves."""
    from infermeter.conduct.run import conduct
    from infermeter.python_api.endpoint import serving

    cfg = prepared.config
    with serving(cfg.target.url, cfg.emulator, cfg.target.backend, announce) as endpoint:
        return await conduct(cfg, endpoint, prepared.out, progress, prepared.work)


def run_text(result: RunResult) -> str:
    """What a finished run prints: the minimum report (the IETF draft, Appendix C.1) and where the run is."""
    from infermeter.records import read_run_info
    from infermeter.report.console import minimum_report

    return (
        minimum_report(result.summary, read_run_info(result.run_dir))
        + f"\n\nrun directory: {result.run_dir}  (full tables: infermeter report {result.run_dir})"
    )


def stopped_by(result: RunResult) -> str | None:
    """Why the run ended before its end (a signal, a full disk, a lost worker), or None."""
    return result.disk_failure or result.stopped


@dataclass(frozen=True)
class _Call:
    """A call of `benchmark` or `benchmark_async`, checked: what to run and what to do around it."""

    prepared: Prepared
    progress: bool
    report: bool
    export: list[ExportSpec]


def _call(
    function: str,
    config: RunConfig | str | PathLike[str] | None,
    out: str | PathLike[str] | None,
    progress: bool,
    report: bool,
    emulator_config: str | PathLike[str] | None,
    scheduler: str | None,
    export: Iterable[ExportSpec | str] | ExportSpec | str,
    options: Mapping[str, Any],
) -> _Call:
    """The options checked as the command line checks them, the exporters checked, the requests drawn."""
    from infermeter.python_api.exporting import check, export_specs

    given = given_from(options, RUN_FIELDS, function, "infermeter run", OWN)
    emulator_file, chosen = emulator_options(emulator_config, scheduler)
    run_dir = output_path("out", out)
    specs = export_specs(export)
    cfg = run_configuration(config, given, emulator_file, chosen)
    check(specs)
    return _Call(prepare(cfg, run_dir, "api"), progress, report, specs)


def _finished(call: _Call, result: RunResult) -> Run:
    """After the run: the report printed if asked, the exports sent (their problems warned), the Run.  A run stopped
    by Ctrl-C raises KeyboardInterrupt and one stopped by SIGTERM SystemExit, once what was measured is written."""
    from infermeter.errors import ExitCode
    from infermeter.python_api.exporting import send_run, warn
    from infermeter.python_api.run_handle import Run

    if call.report:
        print(run_text(result), flush=True)
    if result.stopped == "interrupted":
        raise KeyboardInterrupt(f"interrupted: what was measured is in {result.run_dir}")
    if result.stopped == "terminated":  # the process was asked to end: it does, as it would have without the run
        raise SystemExit(ExitCode.TERMINATED)
    warn(send_run(call.export, result.run_dir, stopped_by(result)))
    return Run(result.run_dir)


def _announce(progress: bool) -> Announce | None:
    """Where the emulator's start is said: stderr with progress shown, nowhere otherwise."""
    return _to_stderr if progress else None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def benchmark(
    config: RunConfig | str | PathLike[str] | None = None,
    /,
    *,
    out: str | PathLike[str] | None = None,
    progress: bool = False,
    report: bool = False,
    emulator_config: str | PathLike[str] | None = None,
    scheduler: str | None = None,
    export: Iterable[ExportSpec | str] | ExportSpec | str = (),
    **options: Any,
) -> Run:
    """Benchmark a server (`url=`), or the embedded emulator when no URL is given, as `infermeter run` does, and
    return the run directory it wrote as a `Run`.

    `options` are `infermeter run`'s, named as its configuration fields (`requests`, `rate`, `concurrency`,
    `warmup`, `url`, `api`, `model`, `input_tokens`, `slo`, ...), given as Python values or as the command line's
    strings (`warmup="off"`, `slo="ttft=200ms"`) and checked as it checks them; the defaults are its own.
    `config` is a `RunConfig`, or a scenario file or run directory (`--config`), the options laid over it.  `out`
    is the run directory (default runs/run-YYYYmmdd-HHMMSS); `emulator_config` and `scheduler` configure the
    embedded emulator; `export` sends the results at the end ("mlflow[:URI]", "otlp:URL", "prometheus:FILE"; a
    problem there is a warning).

    Nothing is printed unless asked: `progress=True` shows the live display on stderr, `report=True` prints the
    minimum report (the IETF draft, Appendix C.1).  Bad input raises `UserError` before anything is measured.  A run
    whose requests all failed is returned all the same (its summary says so); Ctrl-C stops the load, keeps what was
    measured and raises KeyboardInterrupt.  In a running event loop (Jupyter, an async program) use
    `benchmark_async`.

    >>> import tempfile, infermeter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     run = infermeter.benchmark(requests=20, rate=20, warmup="off", input_tokens=64, output_tokens=16,
    ...                          out=tmp + "/run")
    ...     print(run.info.kind, run.summary.requests.ok, run.info.load.requests)
    emulated 20 20
    >>> infermeter.benchmark(requests=20, rate=-1)
    Traceback (most recent call last):
    ...
    infermeter.errors.UserError: rate=-1: must be a rate in requests per second above 0 and at most 1e+06, got -1
    """
    refuse_running_loop("benchmark")
    call = _call("benchmark", config, out, progress, report, emulator_config, scheduler, export, options)
    return _finished(call, measure(call.prepared, progress, _announce(progress)))


async def benchmark_async(
    config: RunConfig | str | PathLike[str] | None = None,
    /,
    *,
    out: str | PathLike[str] | None = None,
    progress: bool = False,
    report: bool = False,
    emulator_config: str | PathLike[str] | None = None,
    scheduler: str | None = None,
    export: Iterable[ExportSpec | str] | ExportSpec | str = (),
    **options: Any,
) -> Run:
    """`benchmark` as a coroutine, for a caller whose event loop is running (Jupyter, an async program): the same
    options, checks and run directory, the load sent from the caller's loop.

    The embedded emulator starts in the calling thread, which holds the loop for under a second, and that thread
    keeps one CPU to itself for the run while the emulator takes the others, as `benchmark` does.  Cancelling the
    task cancels the run; what was measured stays in `out`, readable with `open_run`.

    >>> import asyncio, tempfile, infermeter
    >>> async def main(out):
    ...     run = await infermeter.benchmark_async(requests=10, concurrency=2, warmup="off", input_tokens=32,
    ...                                            output_tokens=8, out=out)
    ...     return run.summary.requests.ok
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     print(asyncio.run(main(tmp + "/run")))
    10
    """
    call = _call("benchmark_async", config, out, progress, report, emulator_config, scheduler, export, options)
    return _finished(call, await measure_async(call.prepared, progress, _announce(progress)))
