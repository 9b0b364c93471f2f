"""One run as the catalog reads it: run.json, the summary (summary.json as written, or recomputed from the records
of a run that left none), its headline figures, and whether its records are sealed in records.parquet.  Reading
checks what a query over the run could trip on later (the records file's footer and fields), so a damaged run is
refused here, with the reason, and the others are indexed."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.catalog.find import FoundRun, SuiteMembership
from infermeter.errors import UserError
from infermeter.metrics.headline import Figure, headline
from infermeter.metrics.summary import summary_of_run
from infermeter.metrics.summary_model import Summary, read_summary
from infermeter.records import RECORDS, SUMMARY, RecordsFile, read_run_info
from infermeter.run_info import RunInfo

RECOMPUTED = f"no {SUMMARY}: its summary was recomputed from the records"
UNSEALED = f"never closed (no {RECORDS}): its records are read from its journal and left out of the requests view"


@dataclass
class CatalogRun:
    """A run in the catalog: its id (the path it was found at), where it sits in a suite, what run.json declares,
    its summary and headline figures, the records file (None: a run that never closed), and notes on how it was
    read."""

    run_id: str
    path: Path
    suite: SuiteMembership | None
    info: RunInfo
    started_at: dt.datetime  # run.json's start as a naive UTC time (DuckDB's TIMESTAMP)
    summary: Summary
    figures: dict[str, Figure]  # by name, in headline order
    records: Path | None
    notes: list[str]

    def figure(self, name: str) -> float | None:
        """A headline figure's value; None when the run did not measure it."""
        found = self.figures.get(name)
        return found.value if found is not None and np.isfinite(found.value) else None


def read_run(found: FoundRun) -> CatalogRun:
    """The run at `found.path`; a one-line UserError (without the path: the caller names it) when it is damaged."""
    path = found.path
    info = read_run_info(path)
    records = RecordsFile.of_run(path)  # the footer and the fields checked; None: the journal of an open run
    notes = [] if records is not None else [UNSEALED]
    summary = read_summary(path)
    if summary is None:
        summary = summary_of_run(path, info)
        notes.append(RECOMPUTED)
    figures = {f.name: f for f in headline(summary)}
    sealed = path / RECORDS if records is not None else None
    return CatalogRun(str(path), path, found.suite, info, _started(info), summary, figures, sealed, notes)


def _started(info: RunInfo) -> dt.datetime:
    """run.json's started_at as a naive UTC datetime (DuckDB's TIMESTAMP); a time that is no ISO 8601 is a one-line
    error."""
    moment = info.start_time()
    if moment is None:
        raise UserError(f"run.json's started_at {info.started_at!r} is no ISO 8601 time")
    return moment.replace(tzinfo=None)
