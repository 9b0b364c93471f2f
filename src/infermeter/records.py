"""RequestRecord and the run directory (DESIGN.md contracts): run.json, records.parquet, summary.json.

Records are appended to an Arrow IPC journal as requests finish, 16 at a time after a send, or all waiting when a
record finishes 2 s after the last flush (RunWriter says why: a flush holds the event loop), so a run that is
interrupted keeps everything, and even a killed one keeps every request finished before the last flush.  Every
request is also written to a small ledger (`sent.ledger`, 24 bytes) the moment it is sent, so a run whose process
was killed still accounts for every request it sent: those without a record come back as "cancelled: outcome not
recorded".  Closing the run turns the journal into `records.parquet`;
reading a run directory whose run never closed recovers from the journal and the ledger.

A failed request's `error` is "<reason>: <detail>", the reason taken from a short vocabulary (`failure`), so that
summaries count failures by reason.  run.json's model, `RunInfo`, lives in infermeter.run_info (re-exported here);
summary.json's, `Summary`, in infermeter.metrics.summary_model (records writes it, never imports it).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from infermeter.errors import UserError
from infermeter.run_info import ClockAnchor, RunInfo, parse_run_info
from infermeter.secrets import redact, redact_deep

RUN_JSON = "run.json"
RECORDS = "records.parquet"
JOURNAL = "records.journal.arrows"
LEDGER = "sent.ledger"
SUMMARY = "summary.json"

Status = Literal["ok", "error", "timeout", "cancelled"]
STATUSES: tuple[str, ...] = get_args(Status)
NOT_RECORDED = "outcome not recorded"  # sent (the ledger says so) but the process ended before its record was written
DISK_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def failure(reason: str, detail: str = "") -> str:
    """A record's error text: a reason from a short vocabulary, then what a person needs to know."""
    return f"{reason}: {detail}" if detail else reason


def failure_reason(error: str) -> str:
    """The reason part of a record's error text (what summaries count failures by)."""
    return error.split(": ", 1)[0] if error else ""


def disk_trouble(exc: OSError) -> str:
    """One line saying why a write to the run directory failed."""
    if exc.errno in DISK_ERRNOS:
        return f"the run directory's disk is full ({os.strerror(exc.errno or 0)})"
    return f"the run directory cannot be written ({exc.strerror or exc})"


def out_error(run_dir: Path, exc: OSError) -> UserError:
    """The one-line error of a command whose run directory (`--out`) could not be written."""
    return UserError(f"--out {run_dir}: {disk_trouble(exc)}")


@dataclass(slots=True)
class RequestRecord:
    """One request as measured: all times are seconds on the run's monotonic clock, relative to its start."""

    request_id: int
    request_class: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    max_tokens: int = 0
    scheduled_at: float = 0.0
    submitted_at: float = 0.0
    token_times: list[float] = field(default_factory=list)
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    server_token_times: list[float] | None = None
    status: Status = "ok"
    error: str = ""
    ref_input_tokens: int | None = None  # the built prompt's length under run.json's declared tokenizer
    ref_output_tokens: int | None = None  # the received text's length under it
    # what the server reported about this request's own timing; None where it did not say
    cached_tokens: int | None = None  # prompt tokens it served from its prefix cache
    server_prefill_s: float | None = None  # its time processing the prompt (the uncached part)
    server_decode_s: float | None = None  # its time generating the output tokens
    finish_reason: str | None = None  # why the server ended the reply ("length", "stop", "content_filter", ...)
    no_done: bool | None = None  # True: the reply was complete but its stream ended without data: [DONE]


SCHEMA = pa.schema(
    [
        ("request_id", pa.int64()),
        ("request_class", pa.string()),
        ("input_tokens", pa.int32()),
        ("output_tokens", pa.int32()),
        ("max_tokens", pa.int32()),
        ("scheduled_at", pa.float64()),
        ("submitted_at", pa.float64()),
        ("token_times", pa.list_(pa.float64())),
        ("chunk_times", pa.list_(pa.float64())),
        ("chunk_tokens", pa.list_(pa.int32())),
        ("server_token_times", pa.list_(pa.float64())),
        ("status", pa.string()),
        ("error", pa.string()),
        ("ref_input_tokens", pa.int32()),
        ("ref_output_tokens", pa.int32()),
        ("cached_tokens", pa.int32()),
        ("server_prefill_s", pa.float64()),
        ("server_decode_s", pa.float64()),
        ("finish_reason", pa.string()),
        ("no_done", pa.bool_()),
    ]
)


# Nullable record fields added after the first schema: records written before them read back with nulls.
ROW_GROUP = 65_536  # records.parquet's rows per row group
LATER_FIELDS: tuple[str, ...] = (
    "ref_input_tokens",
    "ref_output_tokens",
    "cached_tokens",
    "server_prefill_s",
    "server_decode_s",
    "finish_reason",
    "no_done",
)


_EVERY_FIELD = RequestRecord(  # a record with a value in every column
    request_id=0,
    request_class="x",
    input_tokens=1,
    output_tokens=1,
    max_tokens=1,
    token_times=[0.0],
    chunk_times=[0.0],
    chunk_tokens=[1],
    server_token_times=[0.0],
    error="x",
    ref_input_tokens=1,
    ref_output_tokens=1,
    cached_tokens=0,
    server_prefill_s=0.0,
    server_decode_s=0.0,
    finish_reason="length",
    no_done=True,
)


def records_to_table(records: list[RequestRecord]) -> pa.Table:
    """Arrow table of records in the contract's schema."""
    columns = {name: [getattr(r, name) for r in records] for name in SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Records back from an Arrow table (for tests and small runs; metrics work on columns directly)."""
    return [RequestRecord(**row) for row in table.select(SCHEMA.names).to_pylist()]


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
    return any((run_dir / name).exists() for name in (RUN_JSON, RECORDS, JOURNAL, LEDGER, SUMMARY))


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


LEDGER_DTYPE = np.dtype(
    [("request_id", "<i8"), ("scheduled_at", "<f8"), ("input_tokens", "<i4"), ("max_tokens", "<i4")]
)


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
        records_to_table([_EVERY_FIELD])  # pyarrow's converters set up now, not in the load's first flush (1-10 ms)

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
        table = _read_journal(self.run_dir / JOURNAL)
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


def _read_journal(path: Path) -> pa.Table:
    """Every complete batch of a journal, even one cut off mid-write by a killed process (or written by a version
    before some LATER_FIELDS)."""
    batches: list[pa.RecordBatch] = []
    schema = SCHEMA
    try:
        with pa.OSFile(str(path), "rb") as src:
            reader = pa.ipc.open_stream(src)
            schema = reader.schema
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (pa.ArrowException, OSError):
        pass  # a torn tail: keep the batches read before it
    return _conformed(pa.Table.from_batches(batches, schema=schema)).select(SCHEMA.names)


def write_run_info(run_dir: Path, info: RunInfo) -> None:
    _write_json(run_dir / RUN_JSON, info.model_dump(mode="json"))


def write_summary(run_dir: Path, summary: BaseModel) -> None:
    """summary.json: the summary model (metrics.summary_model.Summary) as JSON, its version included."""
    _write_json(run_dir / SUMMARY, summary.model_dump(mode="json"))


def read_run_info(run_dir: Path) -> RunInfo:
    """run.json of any version this infermeter knows (an older one upgraded); a one-line error otherwise."""
    path = run_dir / RUN_JSON
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory: it has no {RUN_JSON}")
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UserError(f"{path} is not a valid run description: {exc}") from None
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror})") from None
    return parse_run_info(doc, str(path))


def read_records(run_dir: Path) -> pa.Table:
    """The run's records: records.parquet, or what the journal of an unfinished run holds, plus a "cancelled:
    outcome not recorded" record for every request its ledger says was sent but no record covers."""
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist")
    parquet = run_dir / RECORDS
    if parquet.is_file():
        try:
            table = _conformed(pq.read_table(parquet))
            missing = [n for n in SCHEMA.names if n not in table.column_names]
            if missing:
                raise UserError(f"{parquet} lacks the record field(s) {', '.join(missing)}: it is not infermeter's")
            return table.select(SCHEMA.names).cast(SCHEMA)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(parquet, exc) from None
    journal = run_dir / JOURNAL
    if journal.is_file():
        table = _read_journal(journal)
        return pa.concat_tables([table, _unrecorded(run_dir, table)])
    raise UserError(f"{run_dir} holds no records ({RECORDS} is missing)")


def _damaged(parquet: Path, exc: Exception) -> UserError:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return UserError(f"{parquet} is unreadable ({reason}): the run's records are damaged")


class RecordsFile:
    """A sealed run's records.parquet, opened (its footer read, its fields checked) to read one field at a time:
    a metric reads only the columns it needs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # read a page at a time (not a whole column chunk first): the peak stays near the data itself
            self.file = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
            names = set(self.file.schema_arrow.names)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(path, exc) from None
        missing = [n for n in SCHEMA.names if n not in names and n not in LATER_FIELDS]
        if missing:
            raise UserError(f"{path} lacks the record field(s) {', '.join(missing)}: it is not infermeter's")
        self.names = names
        self.rows = self.file.metadata.num_rows

    @classmethod
    def of_run(cls, run_dir: Path) -> RecordsFile | None:
        """The run directory's records.parquet, or None when the run never closed (`read_records` then reads its
        journal); the errors of `read_records` when there is neither."""
        if not run_dir.is_dir():
            raise UserError(f"run directory {run_dir} does not exist")
        if (run_dir / RECORDS).is_file():
            return cls(run_dir / RECORDS)
        if (run_dir / JOURNAL).is_file():
            return None
        raise UserError(f"{run_dir} holds no records ({RECORDS} is missing)")

    def column(self, name: str) -> pa.ChunkedArray:
        """One field in the contract's type (nulls for a field written before it existed); damage is a UserError."""
        kind = SCHEMA.field(name).type
        if name not in self.names:
            return pa.chunked_array([pa.nulls(self.rows, kind)])
        try:
            col = self.file.read(columns=[name]).column(0)
            col = col if col.type == kind else col.cast(kind)
            col.validate(full=True)
            return col
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(self.path, exc) from None

    def room(self, name: str) -> int:
        """At least the number of values a list field holds (the file's count of its entries, null or empty lists
        included): room enough to read them into."""
        meta = self.file.metadata
        leaf = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] == name]
        return sum(meta.row_group(g).column(leaf[0]).num_values for g in range(meta.num_row_groups)) if leaf else 0

    def list_batches(self, name: str, rows: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """A list field a batch of rows at a time: (each row's length, 0 for a null; the rows' values in order, a view
        valid until the next batch).  Reading stops where the caller stops."""
        if name not in self.names:
            yield (
                np.zeros(self.rows, dtype=np.int64),
                np.zeros(0, dtype=SCHEMA.field(name).type.value_type.to_pandas_dtype()),
            )
            return
        row = 0
        try:
            for batch in self.file.iter_batches(batch_size=rows, columns=[name]):
                batch.validate(full=True)
                col = batch.column(0)
                lengths = col.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
                row += len(lengths)
                if row > self.rows:
                    raise ValueError(f"{name} has more rows than the file's {self.rows}")
                yield lengths, col.flatten().to_numpy(zero_copy_only=False)
        except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
            raise _damaged(self.path, exc) from None
        if row != self.rows:
            raise _damaged(self.path, ValueError(f"{name} has {row} rows, not {self.rows}"))

    def lists(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A list field whole: (each row's length, every value in row order), read into one array a batch at a time
        (no second copy of the values is ever held)."""
        lengths = np.zeros(self.rows, dtype=np.int64)
        values = np.empty(self.room(name), dtype=SCHEMA.field(name).type.value_type.to_pandas_dtype())
        row = filled = 0
        for part, flat in self.list_batches(name):
            if filled + len(flat) > len(values):
                raise _damaged(self.path, ValueError(f"{name} holds more values than the file's metadata says"))
            values[filled : filled + len(flat)] = flat
            lengths[row : row + len(part)] = part
            filled, row = filled + len(flat), row + len(part)
        return lengths, values[:filled]

    def valid_batches(self, name: str, rows: int = 4096) -> Iterator[np.ndarray]:
        """Which rows of a field are not null, a batch of rows at a time (to stop reading once the answer is known)."""
        if name not in self.names:
            yield np.zeros(self.rows, dtype=bool)
            return
        try:
            for batch in self.file.iter_batches(batch_size=rows, columns=[name]):
                yield batch.column(0).is_valid().to_numpy(zero_copy_only=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(self.path, exc) from None


def _conformed(table: pa.Table) -> pa.Table:
    """A table written before some nullable fields existed, with those fields added as nulls."""
    for name in LATER_FIELDS:
        if name not in table.column_names:
            table = table.append_column(SCHEMA.field(name), pa.nulls(table.num_rows, SCHEMA.field(name).type))
    return table


def is_sealed(run_dir: Path) -> bool:
    """Whether the run closed normally (its records were sealed into records.parquet)."""
    return (run_dir / RECORDS).is_file()


def _unrecorded(run_dir: Path, table: pa.Table) -> pa.Table:
    """Records for requests the ledger has but the journal lacks (the process ended before writing them)."""
    path = run_dir / LEDGER
    if not path.is_file():
        return table.slice(0, 0)
    return records_to_table(unrecorded(read_ledger(path), set(table.column("request_id").to_pylist())))


def read_ledger(path: Path) -> np.ndarray:
    """A ledger's complete entries (LEDGER_DTYPE), a torn last one dropped."""
    raw = path.read_bytes()
    return np.frombuffer(raw[: len(raw) - len(raw) % LEDGER_DTYPE.itemsize], dtype=LEDGER_DTYPE)


def unrecorded(sent: np.ndarray, have: set[int], who: str = "the client process") -> list[RequestRecord]:
    """A "cancelled: outcome not recorded" record for every ledger entry whose request has no record in `have`."""
    return [
        RequestRecord(
            request_id=int(e["request_id"]),
            input_tokens=int(e["input_tokens"]),
            max_tokens=int(e["max_tokens"]),
            scheduled_at=float(e["scheduled_at"]),
            status="cancelled",
            error=failure(
                NOT_RECORDED,
                f"sent at {float(e['scheduled_at']):.3f} s; {who} ended (killed or crashed) before this request's "
                "record was written",
            ),
        )
        for e in sent
        if int(e["request_id"]) not in have
    ]


def write_records(run_dir: Path, info: RunInfo, records: list[RequestRecord] | pa.Table) -> pa.Table:
    """Write a whole run at once (tests, simulated runs): run.json plus records.parquet."""
    with RunWriter(run_dir, info) as writer:
        if isinstance(records, pa.Table):
            writer.extend(records)
        else:
            for r in records:
                writer.append(r)
    return read_records(run_dir)


class RunClock:
    """The run's one monotonic clock: seconds since the run started (time.perf_counter, CLOCK_MONOTONIC)."""

    def __init__(self, origin: float | None = None) -> None:
        """`origin`: the perf_counter value that is the run's 0 (a worker process takes its coordinator's)."""
        self.t0 = time.perf_counter() if origin is None else origin

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def at(self, perf_counter_value: float) -> float:
        return perf_counter_value - self.t0

    def anchor(self, tries: int = 7) -> ClockAnchor:
        """Run-clock 0 on CLOCK_MONOTONIC and on the wall clock, in nanoseconds: the monotonic read taken between
        two wall-clock reads, the tightest pair of `tries` (a preemption between reads widens only that pair)."""
        best: tuple[int, int, int] | None = None
        for _ in range(tries):
            w0 = time.time_ns()
            m = time.perf_counter_ns()
            w1 = time.time_ns()
            if best is None or w1 - w0 < best[2]:
                best = (m, (w0 + w1) // 2, w1 - w0)
        assert best is not None
        m, wall, spread = best
        origin = round(self.t0 * 1e9)
        return ClockAnchor(monotonic_ns=origin, wall_ns=wall - (m - origin), uncertainty_ns=(spread + 1) // 2)
