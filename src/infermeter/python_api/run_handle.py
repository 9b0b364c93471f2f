"""A run directory as the Python API hands it back: its run.json, its summary and its records, each read when first
asked for and kept."""

from __future__ import annotations

from functools import cached_property
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from infermeter.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa

    from infermeter.metrics.summary_model import Summary
    from infermeter.run_info import RunInfo


class Run:
    """One run directory: live, emulated (`benchmark`) or simulated (`simulate`).

    `info` is its run.json (`RunInfo`), `summary` its summary.json (`Summary`; computed from the records, as
    `infermeter report` computes it, when the run left none), `records` its records, one row per request (a pyarrow
    Table: `run.records.to_pandas()` with pandas installed).  Each is read on first use, then kept.

    >>> import tempfile, infermeter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     run = infermeter.simulate(requests=100, rate=5, out=tmp + "/sim")
    ...     print(run.info.kind, run.summary.requests.ok, run.records.num_rows)
    simulated 100 100
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r})"

    @cached_property
    def info(self) -> RunInfo:
        """run.json: what was run, against what, how (any version infermeter reads, upgraded)."""
        from infermeter.records import read_run_info

        return read_run_info(self.path)

    @cached_property
    def summary(self) -> Summary:
        """summary.json; for a run that left none (stopped by a full disk, or killed), computed from its records as
        `infermeter report` computes it (metrics.summary.run_summary)."""
        from infermeter.metrics.summary import run_summary

        return run_summary(self.path, self.info)

    @cached_property
    def records(self) -> pa.Table:
        """The records (DESIGN.md's RequestRecord, one row per request); an unfinished run's from its journal."""
        from infermeter.records import read_records

        return read_records(self.path)

    def report(self, html: str | PathLike[str] | None = None, markdown: str | PathLike[str] | None = None) -> str:
        """The full text report `infermeter report` prints; with `html` / `markdown`, also the full report (the IETF
        draft, Appendix C.2) written there as one offline HTML file with plots, or as Markdown."""
        from infermeter.config.checks import report_file
        from infermeter.python_api.options import checked
        from infermeter.report.console import full_report, sim_table

        text = full_report(self.summary, self.info)
        if self.summary.sim is not None:
            text += "\n\n" + sim_table(self.summary)
        asked = (("html", html), ("markdown", markdown))
        files = [(checked(name, p, report_file), name == "markdown") for name, p in asked if p is not None]
        if files:
            from infermeter.metrics import RecordColumns
            from infermeter.report.documents import run_document
            from infermeter.report.html import write_report

            doc = run_document(self.path, self.info, self.summary, RecordColumns.of_run(self.path, self.info))
            for path, is_markdown in files:
                write_report(doc, path, is_markdown)
        return text


def open_run(path: str | PathLike[str]) -> Run:
    """The run in `path`, a directory `infermeter run`, `infermeter sim`, a suite's run or `benchmark` wrote; nothing
    is read until asked for, but a directory that holds no run is refused at once.

    >>> import os, tempfile, infermeter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = infermeter.simulate(requests=100, rate=5, out=tmp + "/sim")
    ...     run = infermeter.open_run(tmp + "/sim")
    ...     text = run.report(html=tmp + "/report.html")
    ...     print(run.summary.requests.total, "Table 1" in text, os.path.isfile(tmp + "/report.html"))
    100 True True
    """
    from infermeter.records import RUN_JSON
    from infermeter.suite_result import SUITE_JSON

    run = Path(path)
    if not (run / RUN_JSON).is_file():
        if (run / SUITE_JSON).is_file():
            from infermeter.suites.lab import RUNS

            raise UserError(f"{run} is a test suite's directory: its runs are in {run / RUNS}")
        raise UserError(f"{run} is not a run directory: it has no {RUN_JSON}")
    return Run(run)
