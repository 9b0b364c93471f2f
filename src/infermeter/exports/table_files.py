"""Writing a table as CSV, JSONL or Parquet, to a file or to standard output: which format a path asks for, and the
writers.  CSV holds scalars only (its list columns are left out); JSONL and Parquet keep list columns as lists.

pyarrow is imported where a table is written, so that a command's --help can name the formats without it."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from infermeter.config.checks import refuse_results_file
from infermeter.errors import UserError

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet")
LIST_FORMATS = frozenset({"jsonl", "parquet"})  # those that keep list columns
SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
JSONL_BATCH = 4096  # rows serialized before one write


def table_format(fmt: str | None, out: Path | None) -> str:
    """The format asked for: --format, else --out's suffix, else CSV; Parquet only to a file (it is not a stream)."""
    if fmt is None and out is not None:
        fmt = SUFFIXES.get(out.suffix.lower())
        if fmt is None:
            raise UserError(
                f"--out {out}: cannot tell the format from its suffix; name a .csv, .jsonl or .parquet file, or give "
                f"--format {'|'.join(FORMATS)}"
            )
    fmt = fmt or "csv"
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt}: unknown; give one of {', '.join(FORMATS)}")
    if fmt == "parquet" and out is None:
        raise UserError("--format parquet writes a file, not a stream: give --out FILE.parquet")
    return fmt


def write_table(table: pa.Table, fmt: str, out: Path | None) -> None:
    """Write the table in `fmt` to `out`, whole or not at all (a failed write leaves no partial file), or to standard
    output when `out` is None; a write that fails, or that would write over a run's or suite's file, is a one-line
    UserError."""
    if out is None:
        try:
            _write(table, fmt, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        except BrokenPipeError:  # the reader stopped early (`| head`): what it wanted, it has
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    refuse_results_file(out, f"--out {out}")  # again as it is written: the option's check ran before the read
    direct = out.exists() and not out.is_file()  # a device or a pipe (/dev/stdout): written in place
    target = out if direct else out.with_name(f".{out.name}.partial")
    try:
        with target.open("wb") as sink:
            _write(table, fmt, sink)
        if not direct:
            os.replace(target, out)
    except OSError as exc:
        if not direct:
            with contextlib.suppress(OSError):
                target.unlink()
        raise UserError(f"--out {out} cannot be written ({exc.strerror or exc})") from None


def _write(table: pa.Table, fmt: str, sink: BinaryIO) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "csv":
        scalars = [f.name for f in table.schema if not pa.types.is_list(f.type)]
        sink.write((",".join(scalars) + "\n").encode())  # pyarrow would quote every name
        options = pacsv.WriteOptions(include_header=False, quoting_style="needed")
        pacsv.write_csv(table.select(scalars), sink, options)
    elif fmt == "jsonl":
        write_jsonl(table, sink)
    else:
        pq.write_table(table, sink, compression="zstd")


def write_jsonl(table: pa.Table, sink: BinaryIO) -> None:
    """One JSON object per row, keys in the table's order; nulls as null, lists of floats as arrays (orjson, a batch
    of rows per write)."""
    import orjson

    names = table.column_names
    columns = [_row_values(table.column(name).combine_chunks()) for name in names]
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
    for start in range(0, table.num_rows, JSONL_BATCH):
        part = zip(*(c[start : start + JSONL_BATCH] for c in columns), strict=True)
        sink.write(b"".join(orjson.dumps(dict(zip(names, row, strict=True)), option=option) for row in part))


def _row_values(array: pa.Array) -> list[object]:
    """A column as one Python value per row; a list column's rows as numpy views (orjson writes them fast)."""
    import pyarrow as pa

    if not pa.types.is_list(array.type):
        return array.to_pylist()
    offsets = array.offsets.to_numpy()
    values = array.values.to_numpy(zero_copy_only=False)
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    return [values[a:b] if ok else None for a, b, ok in zip(offsets[:-1], offsets[1:], valid, strict=True)]
