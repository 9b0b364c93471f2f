"""Writing a run directory: run.json first, then records journaled as requests finish (with a ledger of every send),
sealed into records.parquet when the run closes, and summary.json; every JSON written with its secrets masked."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from infermeter.errors import UserError
from infermeter.records.reader import read_journal, read_records
from infermeter.records.schema import (
    EVERY_FIELD,
    JOURNAL,
    LEDGER,
    LEDGER_DTYPE,
    RECORDS,
    RUN_FILES,
    RUN_JSON,
    SCHEMA,
    SUMMARY,
    RequestRecord,
    records_to_table,
)
from infermeter.run_info import RunInfo
from infermeter.secrets import redact, redact_deep

DISK_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
ROW_GROUP = 65_536  # records.parquet's rows per row group


def disk_trouble(exc: OSError) -> str:
    """One line saying why a write to the run directory failed."""
    if exc.errno in DISK_ERRNOS:
        return f"the run directory's disk is full ({os.strerror(exc.errno or 0)})"
    return f"the run directory cannot be written ({exc.strerror or exc})"


def out_error(run_dir: Path, exc: OSError) -> UserError:
    """The one-line error of a command whose run directory (`--out`) could not be written."""
    return UserError(f"--out {run_dir}: {disk_trouble(exc)}")


def _write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a reader never sees half a file), with every secret masked."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_bytes(orjson.dumps(redact_deep(data), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def holds_run(run_dir: Path) -> bool:
    """Whether a directory already holds a run (or the start of one) that writing there would overwrite."""
    return any((run_dir / name).exists() for name in RUN_FILES)


def claim_run_dir(run_dir: Path, info: RunInfo) -> None:
    """Create a run directory and write its run.json, before anything is measured.  Refuses a directory that
    already holds a run, and a place that cannot be written, with a one-line error."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir} is a file: give a directory for the run")
    if holds_run(run_dir):
        raise UserError(f"--out {run_dir} already holds a run: choose a new directory or remove that one")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_run_info(run_dir, info)
    except OSError as exc:
        raise out_error(run_dir, exc) from None


def measured_anything(run_dir: Path) -> bool:
    """Whether a run directory holds a request: a sealed run's records, a journaled record, or a send in the ledger
    (written the moment a request goes out)."""
    if (run_dir / RECORDS).exists():
        return True
    ledger, journal = run_dir / LEDGER, run_dir / JOURNAL
    sent = ledger.exists() and ledger.stat().st_size >= LEDGER_DTYPE.itemsize
    return sent or (journal.exists() and read_journal(journal).num_rows > 0)


@contextlib.contextmanager
def claimed_run_dir(run_dir: Path, info: RunInfo) -> Iterator[None]:
    """`claim_run_dir` for the block, released when the block raises before any request was sent: what the claim and
    the block created goes (the directory and its parents when the claim made them, else the entries new in it), so
    the same command can be run again; anything that was there before stays.  A run that sent requests keeps it."""
    made = [p for p in (run_dir, *run_dir.parents) if not p.exists()]
    before = set() if made else {p.name for p in run_dir.iterdir()} if run_dir.is_dir() else set()
    try:
        claim_run_dir(run_dir, info)
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            if run_dir.is_dir() and not measured_anything(run_dir):
                _release(run_dir, made, before)
        raise


def _release(run_dir: Path, made: list[Path], before: set[str]) -> None:
    """Remove what a failed run created in `run_dir`: all of it and the parents it made (deepest first, each only
    when empty), or only the entries not in `before`."""
    if made:
        shutil.rmtree(run_dir)
        for parent in made[1:]:
            parent.rmdir()  # an OSError (not empty: someone else wrote there meanwhile) stops here, keeping the rest
        return
    for entry in run_dir.iterdir():
        if entry.name in before:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


SEND_HOLD = 4  # how many flushes' worth of records a writer told of sends keeps waiting for one (see RunWriter)


class RunWriter:
    """Appends records to a run directory as requests finish; `close()` seals them into records.parquet.

    A write that fails (the disk is full, a file-size limit) does not raise: the writer keeps later records in
    memory, says why in `failure`, and calls `on_failure` once so the run can stop sending.  A flush converts its
    records on the event loop, holding any send that falls due meanwhile (16 records: 0.15 ms on a quiet core,
    0.6-0.8 ms inside a run at 1,000 req/s, mostly cold caches; 64 took 0.85-1.3 ms there, more than the 1 ms
    between sends).  A writer told of sends (`sent`) therefore flushes right after one, where the schedule leaves
    the most room before the next, at most `flush_every` records at a time, and from `append` only once SEND_HOLD
    times as many records wait or the interval has passed since the last flush.
    """

    def __init__(
        self,
        run_dir: Path,
        info: RunInfo,
        flush_every: int = 16,  # a flush converts its records on the event loop: its time holds every send
        flush_interval_s: float = 2.0,
        on_failure: Callable[[str], None] | None = None,
        claimed: bool = False,
    ) -> None:
        """`claimed`: the caller already made the directory with `claim_run_dir` (before its warm-up)."""
        self.run_dir = run_dir
        if not claimed:
            claim_run_dir(run_dir, info)
        self.info = info
        self.on_failure = on_failure
        self.failure: str | None = None
        self.unwritten: list[RequestRecord] = []
        self._pending: list[RequestRecord] = []
        self._flush_every = flush_every
        self._flush_interval = flush_interval_s
        self._last_flush = time.monotonic()
        self._told_of_sends = False
        self.count = 0
        self.closed = False
        try:
            write_run_info(run_dir, info)
            self._sink = pa.OSFile(str(run_dir / JOURNAL), "wb")
            self._stream = pa.ipc.new_stream(self._sink, SCHEMA)
            self._ledger = os.open(run_dir / LEDGER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise out_error(run_dir, exc) from None
        records_to_table([EVERY_FIELD])  # pyarrow's converters set up now, not in the load's first flush (1-10 ms)

    def sent(self, request_id: int, scheduled_at: float, input_tokens: int, max_tokens: int) -> None:
        """Note a request the moment it is sent (a killed run still accounts for it)."""
        if self.failure is not None:
            return
        entry = np.array([(request_id, scheduled_at, input_tokens, max_tokens)], dtype=LEDGER_DTYPE)
        try:
            os.write(self._ledger, entry.tobytes())
        except OSError as exc:
            self._failed(exc)
        self._told_of_sends = True
        if len(self._pending) >= self._flush_every:
            self._flush(self._flush_every)  # the oldest: a burst of replies is journaled over the next sends

    def append(self, record: RequestRecord) -> None:
        if record.error:
            record.error = redact(record.error)
        self.count += 1
        if self.failure is not None:
            self.unwritten.append(record)
            return
        self._pending.append(record)
        hold = self._flush_every * (SEND_HOLD if self._told_of_sends else 1)
        if len(self._pending) >= hold or time.monotonic() - self._last_flush >= self._flush_interval:
            self.flush()

    def extend(self, table: pa.Table) -> None:
        """Append records already in columnar form (the simulator writes whole batches)."""
        self.flush()
        if self.failure is not None:  # a batch after a torn write would be lost to the journal's reader
            raise UserError(f"--out {self.run_dir}: {self.failure}")
        try:
            self._stream.write_table(table.select(SCHEMA.names).cast(SCHEMA))
            self._sink.flush()
        except OSError as exc:
            self._failed(exc)
            raise UserError(f"--out {self.run_dir}: {self.failure}") from None
        self.count += table.num_rows

    def flush(self) -> None:
        self._flush(len(self._pending))

    def _flush(self, count: int) -> None:
        """Journal the oldest `count` pending records."""
        batch = self._pending[:count]
        del self._pending[:count]
        if batch:
            try:
                self._stream.write_table(records_to_table(batch))
                self._sink.flush()
            except OSError as exc:
                self.unwritten.extend(batch)
                self._failed(exc)
        self._last_flush = time.monotonic()

    def _failed(self, exc: OSError) -> None:
        """Stop writing: the records waiting for a flush join `unwritten` ahead of any later one."""
        self.unwritten.extend(self._pending)
        self._pending.clear()
        if self.failure is None:
            self.failure = disk_trouble(exc)
            if self.on_failure is not None:
                self.on_failure(self.failure)

    def close(self, summary: BaseModel | None = None) -> pa.Table:
        """Seal the journal into records.parquet (and write summary.json when given); returns the records, those
        a failed disk could not take included."""
        if self.closed:
            return read_records(self.run_dir)
        self.flush()
        self.closed = True
        with contextlib.suppress(OSError):
            self._stream.close()
        with contextlib.suppress(OSError):
            self._sink.close()
        os.close(self._ledger)
        table = read_journal(self.run_dir / JOURNAL)
        if self.unwritten:
            table = pa.concat_tables([table, records_to_table(self.unwritten)])
        if self.failure is not None:
            return table  # the journal stays as it is: `report` reads it
        try:
            tmp = self.run_dir / (RECORDS + ".tmp")
            pq.write_table(table, tmp, compression="zstd", row_group_size=ROW_GROUP)
            os.replace(tmp, self.run_dir / RECORDS)
            (self.run_dir / JOURNAL).unlink()
            (self.run_dir / LEDGER).unlink()
            write_run_info(self.run_dir, self.info)
            if summary is not None:
                write_summary(self.run_dir, summary)
        except OSError as exc:
            with contextlib.suppress(OSError):
                (self.run_dir / (RECORDS + ".tmp")).unlink()
            self._failed(exc)
        return table

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_run_info(run_dir: Path, info: RunInfo) -> None:
    _write_json(run_dir / RUN_JSON, info.model_dump(mode="json"))


def write_summary(run_dir: Path, summary: BaseModel) -> None:
    """summary.json: the summary model (metrics.summary_model.Summary) as JSON, its version included."""
    _write_json(run_dir / SUMMARY, summary.model_dump(mode="json"))


def write_records(run_dir: Path, info: RunInfo, records: list[RequestRecord] | pa.Table) -> pa.Table:
    """Write a whole run at once (tests, simulated runs): run.json plus records.parquet."""
    with RunWriter(run_dir, info) as writer:
        if isinstance(records, pa.Table):
            writer.extend(records)
        else:
            for r in records:
                writer.append(r)
    return read_records(run_dir)
