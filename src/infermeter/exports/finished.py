"""A finished run or suite as the exporters read it: run.json, summary.json and the headline figures of a run, or a
suite's suite.json with its runs, read once and handed to every exporter (MLflow, OTLP, Prometheus) unchanged."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from infermeter.errors import UserError
from infermeter.metrics.headline import Figure, headline
from infermeter.metrics.summary_model import Summary, read_summary
from infermeter.records import SUMMARY, read_run_info
from infermeter.run_info import RunInfo, wall_time
from infermeter.suite_result import SuiteResult


@dataclass(frozen=True)
class FinishedRun:
    """One run directory read for export: what it declares (run.json), what it measured (summary.json), its
    headline figures, and when it ended (nanoseconds since the Unix epoch)."""

    run_dir: Path
    info: RunInfo
    summary: Summary
    figures: list[Figure]
    end_ns: int

    @property
    def name(self) -> str:
        """The run's name everywhere it is exported: its directory's name."""
        return self.run_dir.resolve().name

    @property
    def model(self) -> str:
        """The model the run measured as the SUT declares it ('' when none was declared)."""
        client = self.info.client
        return self.info.sut.model or (client.model if client is not None and client.model else "")

    @property
    def api(self) -> str:
        """The API the requests went to (completions, chat, embeddings...; '' for a simulated engine)."""
        client = self.info.client
        return client.api if client is not None and client.api else ""

    @property
    def labels(self) -> dict[str, str]:
        """What tells this run's figures from another run's: run, model, api and kind, always all four ('' when not
        known: Prometheus wants every sample of a metric to carry the same label names)."""
        return {"run": self.name, "model": self.model, "api": self.api, "kind": self.info.kind}


@dataclass(frozen=True)
class FinishedSuite:
    """A suite directory read for export: its suite.json, those of its runs whose directories are there, and when
    it finished (nanoseconds since the Unix epoch)."""

    suite_dir: Path
    result: SuiteResult
    runs: list[tuple[str, FinishedRun]]  # (the run's key in the suite, the run)
    infos: list[RunInfo]  # run.json of every run present, for the suite's report
    end_ns: int

    @property
    def name(self) -> str:
        """The suite's name everywhere it is exported: its directory's name."""
        return self.suite_dir.resolve().name

    @property
    def figures(self) -> dict[str, tuple[float, str]]:
        """The suite's headline figures (suite.json's analysis.headline): name -> (value, unit), numbers only."""
        out = {}
        for name, unit in self.result.analysis.headline.items():
            value = self.result.analysis.figures.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = (float(value), unit)
        return out


def read_run(run_dir: Path) -> FinishedRun:
    """A run directory with its run.json and summary.json; a one-line UserError when either is missing or damaged."""
    info = read_run_info(run_dir)
    summary = read_summary(run_dir)
    if summary is None:
        raise UserError(f"{run_dir} has no {SUMMARY}: the run did not finish")
    return FinishedRun(run_dir, info, summary, headline(summary), run_end_ns(info, summary))


def read_suite(suite_dir: Path) -> FinishedSuite:
    """A suite directory with its suite.json and each of its runs that is there, where suites.execute finds it (a
    run left out of the directory is left out of the export); a one-line UserError when suite.json or a present run
    is damaged."""
    from infermeter.suites.execute import load_result, suite_run_dirs

    result = load_result(suite_dir)
    runs = [(key, read_run(path)) for key, path in suite_run_dirs(suite_dir, result).items()]
    end = wall_ns(result.finished_at) or max((run.end_ns for _, run in runs), default=time.time_ns())
    return FinishedSuite(suite_dir, result, runs, [run.info for _, run in runs], min(end, time.time_ns()))


def run_end_ns(info: RunInfo, summary: Summary) -> int:
    """When the run's measurement ended: its wall-clock start, plus where its measured load began on the run's
    clock, plus the measurement window; never later than now (a simulated run's virtual clock runs ahead)."""
    start = wall_ns(info.started_at)
    if start is None:
        return time.time_ns()
    offset_s = (info.started_at_clock or 0.0) + summary.duration_s
    return min(start + round(offset_s * 1e9), time.time_ns())


def wall_ns(iso: str) -> int | None:
    """An ISO 8601 wall-clock time (run.json's started_at, suite.json's finished_at) in nanoseconds since the
    epoch, UTC when it names no zone (run_info.wall_time reads it); None when it is not one."""
    moment = wall_time(iso)
    return None if moment is None else round(moment.timestamp() * 1e6) * 1000
