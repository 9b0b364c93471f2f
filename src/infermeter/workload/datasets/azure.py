"""Azure LLM inference traces (the public 2023 and 2024 CSVs): `TIMESTAMP` (wall-clock, 7 fractional digits, an
optional UTC offset), `ContextTokens` and `GeneratedTokens`, one request of lengths per row."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infermeter.workload.dataset import Session, Turn
from infermeter.workload.datasets.fields import show, whole
from infermeter.workload.datasets.reader import Read
from infermeter.workload.datasets.source import Rows, Source
from infermeter.workload.datasets.tables import csv_numbering, csv_table
from infermeter.workload.limits import MAX_LENGTH

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
DROPS = {
    "ContextTokens": "no context tokens (ContextTokens 0)",
    "GeneratedTokens": "no tokens generated (GeneratedTokens 0)",
}


def read_azure(source: Source, block_tokens: int) -> Read:
    table = csv_table(source.path, ("TIMESTAMP",))
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise source.fail(
            f"no column {', '.join(missing)}: an Azure LLM inference trace has TIMESTAMP, ContextTokens and "
            "GeneratedTokens (or give the right --dataset-format)"
        )
    rows = csv_numbering(source.path, table.num_rows)
    seconds = _seconds(rows, table.column("TIMESTAMP"))
    if len(seconds) > 1 and (back := np.flatnonzero(np.diff(seconds) < 0)).size:
        i = int(back[0]) + 1
        raise rows.fail(
            i,
            f"TIMESTAMP {table.column('TIMESTAMP')[i].as_py()} is earlier than the row before: timestamps must not "
            "decrease; sort the file by TIMESTAMP",
        )
    lengths = {name: _lengths(rows, table.column(name), name) for name in COLUMNS[1:]}
    read = Read(rows=table.num_rows)
    keep = np.ones(table.num_rows, dtype=bool)
    for name, values in lengths.items():
        empty = keep & (values == 0)
        if empty.any():
            read.dropped[DROPS[name]] += int(empty.sum())
        keep &= ~empty
    inputs, outputs = lengths["ContextTokens"], lengths["GeneratedTokens"]
    for i in np.flatnonzero(keep).tolist():
        row = rows.numbers[i]
        turn = Turn(None, input_tokens=int(inputs[i]), output_tokens=int(outputs[i]))
        read.sessions.append(Session(str(row), (turn,), row, float(seconds[i])))
    return read


def _seconds(rows: Rows, column: pa.ChunkedArray) -> np.ndarray:
    """TIMESTAMP as seconds since the epoch (a time without offset read as UTC); the first unreadable row named."""
    for kind in (pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
        try:
            stamps = pc.cast(column, kind)
        except pa.ArrowInvalid:
            continue
        if stamps.null_count == 0:
            return stamps.cast(pa.int64()).to_numpy() / 1e9
        break
    values = column.to_pylist()
    for i, value in enumerate(values):
        try:
            datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise rows.fail(
                i, f"TIMESTAMP {show(value)} is not a date and time: give it as 2023-11-16 18:15:46.6805900"
            ) from None
    return np.asarray([_epoch(datetime.fromisoformat(v)) for v in values])


def _epoch(stamp: datetime) -> float:
    return (stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)).timestamp()


def _lengths(rows: Rows, column: pa.ChunkedArray, name: str) -> np.ndarray:
    """A column of token counts as whole numbers from 0 to MAX_LENGTH (as every length the CLI takes); the first
    bad row named."""
    if pa.types.is_integer(column.type) and column.null_count == 0:
        out = column.to_numpy()
        if ((out >= 0) & (out <= MAX_LENGTH)).all():
            return out
    values = column.to_pylist()
    for i, value in enumerate(values):
        n = whole(value)
        if n is None or not 0 <= n <= MAX_LENGTH:
            raise rows.fail(
                i, f"{name} {show(value)} is not a whole number of tokens: give a count from 0 to {MAX_LENGTH:,}"
            )
    return np.asarray(values, dtype=np.int64)
