"""Reading a run directory: run.json, and the records as records.parquet holds them (whole, or a field at a time),
or, for a run that never closed, as its journal and ledger left them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from infermeter.errors import UserError
from infermeter.records.schema import (
    JOURNAL,
    LATER_FIELDS,
    LEDGER,
    LEDGER_DTYPE,
    NOT_RECORDED,
    RECORDS,
    RUN_JSON,
    SCHEMA,
    RequestRecord,
    failure,
    records_to_table,
)
from infermeter.run_info import RunInfo, parse_run_info

BATCH_ROWS = 4096  # rows per batch of a list field streamed from records.parquet


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
        table = read_journal(journal)
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
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(self.path, exc) from None
        if len(col) != self.rows:  # a damaged page can read as fewer values than the footer's row count
            raise _damaged(self.path, ValueError(f"{name} holds {len(col)} values for {self.rows} rows"))
        return col

    def room(self, name: str) -> int:
        """At least the number of values a list field holds (the file's count of its entries, null or empty lists
        included): room enough to read them into."""
        meta = self.file.metadata
        leaf = [i for i in range(meta.num_columns) if meta.schema.column(i).path.split(".")[0] == name]
        return sum(meta.row_group(g).column(leaf[0]).num_values for g in range(meta.num_row_groups)) if leaf else 0

    def list_batches(self, name: str, rows: int = BATCH_ROWS) -> Iterator[tuple[np.ndarray, np.ndarray]]:
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

    def valid_batches(self, name: str, rows: int = BATCH_ROWS) -> Iterator[np.ndarray]:
        """Which rows of a field are not null, a batch of rows at a time (to stop reading once the answer is known)."""
        if name not in self.names:
            yield np.zeros(self.rows, dtype=bool)
            return
        try:
            for batch in self.file.iter_batches(batch_size=rows, columns=[name]):
                yield batch.column(0).is_valid().to_numpy(zero_copy_only=False)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise _damaged(self.path, exc) from None


def read_journal(path: Path) -> pa.Table:
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
