"""Where a suite's runs happen: each run is an ordinary run directory under the suite's directory, a run already
finished there is reused (so an interrupted suite resumes where it stopped, with decisions replaying identically),
and the target is the given URL or an embedded emulator kept running while consecutive runs share its configuration.
"""

from __future__ import annotations

import contextlib
import shutil
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from infermeter.config.run import RunConfig
from infermeter.config.sections import DATASET_FIELDS
from infermeter.emulator.config import EmulatorConfig
from infermeter.emulator.declaration import sut_declaration
from infermeter.errors import ExitCode, Stopped, UserError
from infermeter.event_loop import run_async
from infermeter.load.target import Endpoint
from infermeter.metrics import RecordColumns, Summary
from infermeter.metrics.summary import run_summary
from infermeter.records import RECORDS, read_run_info
from infermeter.run_info import RunInfo
from infermeter.workload.spec import WorkloadSpec

if TYPE_CHECKING:
    from infermeter.distributed.tasks import TaskMap

RUNS = "runs"
WORKLOADS = "workloads"
STOP_CODES = {"interrupted": ExitCode.INTERRUPTED, "terminated": ExitCode.TERMINATED}


def completed(run_dir: Path) -> bool:
    """A run that ran to its end (sealed records, not stopped by a signal or a full disk) can be reused."""
    if not (run_dir / RECORDS).is_file():
        return False
    try:
        return read_run_info(run_dir).stopped is None
    except UserError:
        return False


@dataclass
class Run:
    """A finished run of the suite: its directory, its summary and run.json, and its records on demand."""

    key: str
    label: str
    run_dir: Path
    summary: Summary
    info: RunInfo
    reused: bool = False
    level: str | None = None  # its place in the plan, named alike in every suite of the test (suites.framework.RunRef)
    _cols: RecordColumns | None = field(default=None, repr=False)

    def columns(self) -> RecordColumns:
        if self._cols is None:
            self._cols = RecordColumns.of_run(self.run_dir, self.info)
        return self._cols


def read_run(key: str, label: str, run_dir: Path, reused: bool) -> Run:
    """A finished run directory as a Run (its summary.json, or the summary computed again when it has none)."""
    info = read_run_info(run_dir)
    return Run(key, label, run_dir, run_summary(run_dir, info), info, reused)


class Lab:
    """Runs for one suite in `out`; `base` holds the target, tokenizer, seed, monitors and disclosures the user gave,
    `emulator` the embedded emulator's configuration when no URL was given; `quick` scales the procedure's counts and
    durations down (never its workload)."""

    def __init__(
        self,
        out: Path,
        base: RunConfig,
        emulator: EmulatorConfig | None,
        progress: bool,
        console: Console,
        quick: bool = False,
    ) -> None:
        self.out = out
        self.quick = quick
        self.base = base
        self.emulator = emulator if base.target.url is None else None
        self.progress = progress
        self.console = console
        self.runs: list[Run] = []
        self._stack = contextlib.ExitStack()
        self._running: tuple[str, Endpoint] | None = None  # the emulator's configuration (JSON), where it serves

    @property
    def embedded(self) -> bool:
        return self.base.target.url is None

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()
        self._running = None

    def workload(self, name: str, spec: WorkloadSpec) -> str:
        """Write a workload the suite composed to the suite's directory; the run configuration names the file, so
        run.json reproduces the run."""
        path = self.out / WORKLOADS / f"{name}.json"
        text = spec.model_dump_json(indent=2)
        if not path.is_file() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return str(path.resolve())

    def simulations(self) -> AbstractContextManager[TaskMap]:
        """A TaskMap for the suite's simulations: dask tasks with --workers / --cluster, else this process."""
        from infermeter.distributed.tasks import task_map

        return task_map(self.base.scale.workers, self.base.scale.cluster)

    def config(
        self,
        *,
        emulator: EmulatorConfig | None = None,
        url: str | None = None,
        workload: dict[str, Any] | None = None,
        load: dict[str, Any] | None = None,
        disclosures: dict[str, Any] | None = None,
    ) -> RunConfig:
        """The base configuration with this run's workload and load fields (and its emulator or URL, and what the
        user declared about that server where it differs from the base's)."""
        base = self.base
        data = base.model_dump(mode="python")
        data["disclosures"] = {**data["disclosures"], **(disclosures or {})}
        data["workload"] = {**data["workload"], "workload": None, "input_tokens": None, "output_tokens": None}
        data["workload"].update(with_dataset(base.workload.dataset, workload or {}))
        data["load"] = {**RunConfig().load.model_dump(), "warmup": base.load.warmup, **(load or {})}
        if url is not None:
            data["target"] = {**data["target"], "url": url}
            data["emulator"] = None
        elif self.embedded:
            data["emulator"] = (emulator or self.emulator or EmulatorConfig()).model_dump(mode="python")
        try:
            return RunConfig.model_validate(data).resolved()
        except ValueError as exc:
            raise UserError(f"the suite built an invalid run configuration: {exc}") from None

    def endpoint(self) -> Endpoint:
        """The target for work that is not a run (a calibration probe): its URL, SUT declaration and /metrics base."""
        # a URL target needs no load to be reached (a run configuration without one does not validate)
        return self._target(self.base if self.base.target.url is not None else self.config(), fresh=False)

    def run(self, key: str, label: str, cfg: RunConfig, fresh: bool = False, level: str | None = None) -> Run:
        """The run named `key`: reused when its directory holds a finished run, else measured now.  `fresh` restarts
        the embedded emulator first (an empty prefix cache, an idle engine); `level` names its place in the plan so
        that suites of the same test compare run by run (default: the key)."""
        run_dir = self.out / RUNS / key
        n = len(self.runs) + 1
        if completed(run_dir):
            run = read_run(key, label, run_dir, reused=True)
            self.console.print(f"[{n}] {label}: reused {run_dir}", highlight=False)
        else:
            if run_dir.exists():  # an interrupted run: measured again from scratch
                shutil.rmtree(run_dir)
            self.console.print(f"[{n}] {label} ...", highlight=False)
            self._measure(cfg, run_dir, fresh)
            run = read_run(key, label, run_dir, reused=False)
        run.level = level or key
        self.runs.append(run)
        return run

    def _measure(self, cfg: RunConfig, run_dir: Path, fresh: bool) -> None:
        from infermeter.conduct.run import conduct

        result = run_async(conduct(cfg, self._target(cfg, fresh), run_dir, self.progress))
        if result.stopped is not None or result.disk_failure is not None:
            why = result.disk_failure or result.stopped
            raise Stopped(
                f"the suite stopped during {run_dir.name} ({why}); the runs finished so far are kept in {self.out}: "
                "run the same command again to resume",
                STOP_CODES.get(str(result.stopped), ExitCode.INCOMPLETE),
            )

    def _target(self, cfg: RunConfig, fresh: bool) -> Endpoint:
        """The URL to load, the SUT declaration and the /metrics base URL; starts or restarts the emulator."""
        if cfg.target.url is not None:
            return Endpoint(cfg.target.url, {}, cfg.target.url)
        emu = cfg.emulator or EmulatorConfig()
        if cfg.target.backend == "grpc":
            emu = emu.model_copy(update={"grpc_port": 0})
        key = emu.model_dump_json()
        if self._running is not None and self._running[0] == key and not fresh:
            return self._running[1]
        self.close()
        self._stack = contextlib.ExitStack()
        from infermeter.client.proxy import direct
        from infermeter.emulator.process import emulator_process

        process = self._stack.enter_context(emulator_process(emu, pin_cpus=True))
        self._stack.enter_context(direct(process.url))  # started here: never through a proxy
        url = process.grpc_target if cfg.target.backend == "grpc" and process.grpc_target else process.url
        self._running = (key, Endpoint(url, sut_declaration(emu), process.url))
        return self._running[1]


def with_dataset(dataset: Path | None, workload: dict[str, Any]) -> dict[str, Any]:
    """A run's workload fields under `test --dataset`: the dataset's requests replace a named workload; a run of
    fixed lengths (the draft's procedure sets them) keeps them and sends no dataset."""
    if dataset is None:
        return workload
    if "workload" in workload:
        return {k: v for k, v in workload.items() if k != "workload"}
    return {**workload, **dict.fromkeys(DATASET_FIELDS)}
