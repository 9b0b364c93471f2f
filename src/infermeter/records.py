"""RequestRecord and the run directory (DESIGN.md contracts): run.json, records.parquet, summary.json.

Records are appended to an Arrow IPC journal as requests finish, flushed every 2 s (or 4096 records), so a run
that is interrupted keeps everything, and even a killed one keeps every request finished before the last flush.
Flushes are batched that coarsely on purpose: at 500 req/s, flushing every few records added ~3 ms to the p99
send lag of the open-loop driver.  Closing the run turns the journal into `records.parquet`; reading a run
directory whose run never closed recovers from the journal.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from infermeter import __version__
from infermeter.errors import UserError

RUN_JSON = "run.json"
RECORDS = "records.parquet"
JOURNAL = "records.journal.arrows"
SUMMARY = "summary.json"

Status = Literal["ok", "error", "timeout", "cancelled"]
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "cancelled")


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
    ]
)


def records_to_table(records: list[RequestRecord]) -> pa.Table:
    """Arrow table of records in the contract's schema."""
    columns = {name: [getattr(r, name) for r in records] for name in SCHEMA.names}
    return pa.Table.from_pydict(columns, schema=SCHEMA)


def table_to_records(table: pa.Table) -> list[RequestRecord]:
    """Records back from an Arrow table (for tests and small runs; metrics work on columns directly)."""
    return [RequestRecord(**row) for row in table.select(SCHEMA.names).to_pylist()]


class RunInfo(BaseModel):
    """run.json: everything a report must declare about how the records were produced."""

    model_config = ConfigDict(extra="allow")
    schema_version: str = "infermeter.run/1"
    kind: Literal["live", "emulated", "simulated", "test"] = "live"
    started_at: str = Field(default_factory=lambda: wall_clock_iso())
    clock: str = "time.perf_counter (monotonic), seconds since the run's start"
    sut: dict[str, Any] = Field(default_factory=dict)
    workload: dict[str, Any] = Field(default_factory=dict)
    load: dict[str, Any] = Field(default_factory=dict)
    tokenizer: dict[str, Any] = Field(default_factory=dict)
    itl_option: Literal["A", "B", "C"] = "B"
    warmup: dict[str, Any] = Field(default_factory=lambda: {"done": False})
    slo: dict[str, float] = Field(default_factory=dict)
    software: dict[str, str] = Field(default_factory=lambda: software_versions())
    notes: list[str] = Field(default_factory=list)


def wall_clock_iso(t: float | None = None) -> str:
    """UTC wall-clock time as ISO 8601 with milliseconds (draft 4.7.4)."""
    moment = dt.datetime.fromtimestamp(time.time() if t is None else t, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def software_versions() -> dict[str, str]:
    out = {"infermeter": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("numpy", "pyarrow", "scipy", "aiohttp"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def _write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    os.replace(tmp, path)


class RunWriter:
    """Appends records to a run directory as requests finish; `close()` seals them into records.parquet."""

    def __init__(self, run_dir: Path, info: RunInfo, flush_every: int = 4096, flush_interval_s: float = 2.0) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        if (run_dir / RECORDS).exists() or (run_dir / JOURNAL).exists():
            raise UserError(f"{run_dir} already holds a run: choose a new --out directory or remove it")
        self.info = info
        write_run_info(run_dir, info)
        self._sink = pa.OSFile(str(run_dir / JOURNAL), "wb")
        self._stream = pa.ipc.new_stream(self._sink, SCHEMA)
        self._pending: list[RequestRecord] = []
        self._flush_every = flush_every
        self._flush_interval = flush_interval_s
        self._last_flush = time.monotonic()
        self.count = 0
        self.closed = False

    def append(self, record: RequestRecord) -> None:
        self._pending.append(record)
        self.count += 1
        if len(self._pending) >= self._flush_every or time.monotonic() - self._last_flush >= self._flush_interval:
            self.flush()

    def extend(self, table: pa.Table) -> None:
        """Append records already in columnar form (the simulator writes whole batches)."""
        self.flush()
        self._stream.write_table(table.select(SCHEMA.names).cast(SCHEMA))
        self._sink.flush()
        self.count += table.num_rows

    def flush(self) -> None:
        if self._pending:
            self._stream.write_table(records_to_table(self._pending))
            self._sink.flush()
            self._pending.clear()
        self._last_flush = time.monotonic()

    def close(self, summary: dict[str, Any] | None = None) -> pa.Table:
        """Seal the journal into records.parquet (and write summary.json when given); returns the records."""
        if self.closed:
            return read_records(self.run_dir)
        self.flush()
        self._stream.close()
        self._sink.close()
        table = _read_journal(self.run_dir / JOURNAL)
        tmp = self.run_dir / (RECORDS + ".tmp")
        pq.write_table(table, tmp, compression="zstd", row_group_size=65536)
        os.replace(tmp, self.run_dir / RECORDS)
        (self.run_dir / JOURNAL).unlink()
        write_run_info(self.run_dir, self.info)
        if summary is not None:
            write_summary(self.run_dir, summary)
        self.closed = True
        return table

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_journal(path: Path) -> pa.Table:
    """Every complete batch of a journal, even one cut off mid-write by a killed process."""
    batches: list[pa.RecordBatch] = []
    try:
        with pa.OSFile(str(path), "rb") as src:
            reader = pa.ipc.open_stream(src)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except (pa.ArrowInvalid, OSError):
        pass  # a torn tail: keep the batches read before it
    return pa.Table.from_batches(batches, schema=SCHEMA)


def write_run_info(run_dir: Path, info: RunInfo) -> None:
    _write_json(run_dir / RUN_JSON, info.model_dump(mode="json"))


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    _write_json(run_dir / SUMMARY, summary)


def read_run_info(run_dir: Path) -> RunInfo:
    path = run_dir / RUN_JSON
    if not path.is_file():
        raise UserError(f"{run_dir} is not a run directory: it has no {RUN_JSON}")
    try:
        return RunInfo.model_validate(orjson.loads(path.read_bytes()))
    except (orjson.JSONDecodeError, ValueError) as exc:
        raise UserError(f"{path} is not a valid run description: {str(exc).splitlines()[0]}") from None


def read_records(run_dir: Path) -> pa.Table:
    """The run's records: records.parquet, or what the journal of an unfinished run holds."""
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist")
    parquet = run_dir / RECORDS
    if parquet.is_file():
        try:
            table = pq.read_table(parquet)
        except (pa.ArrowInvalid, OSError) as exc:
            raise UserError(f"{parquet} is unreadable: {str(exc).splitlines()[0]}") from None
        missing = [n for n in SCHEMA.names if n not in table.column_names]
        if missing:
            raise UserError(f"{parquet} lacks the record field(s) {', '.join(missing)}")
        return table.select(SCHEMA.names).cast(SCHEMA)
    journal = run_dir / JOURNAL
    if journal.is_file():
        return _read_journal(journal)
    raise UserError(f"{run_dir} holds no records ({RECORDS} is missing)")


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

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.wall0 = time.time()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def at(self, perf_counter_value: float) -> float:
        return perf_counter_value - self.t0
