"""Tables read with pyarrow (CSV, Parquet, Arrow IPC) as rows of Python values, numbered as messages name them."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from infermeter.errors import UserError
from infermeter.workload.datasets.source import Rows

CSV_HEADER_LINES = 1  # a CSV's data row i (from 0) is on line i + 2, as the other CSV readers name it


def csv_table(path: Path, text_columns: tuple[str, ...] = ()) -> pa.Table:
    """A CSV file as a table, the named columns kept as text (prompts of digits stay strings)."""
    types = {name: pa.string() for name in text_columns}
    try:
        return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types=types))
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"--dataset {path}: not a readable CSV: {str(exc).splitlines()[0]}") from None


def csv_header(path: Path) -> list[str]:
    """The column names on a CSV's first line (for telling formats apart without reading the file)."""
    try:
        with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
            return next(csv.reader([f.readline()]), [])
    except OSError as exc:
        raise UserError(f"--dataset {path} cannot be read: {exc.strerror or exc}") from None


def csv_rows(path: Path, table: pa.Table) -> Rows:
    """A CSV table's rows as Python values, numbered by their lines."""
    return Rows(path, table.to_pylist(), csv_numbering(path, table.num_rows).numbers)


def csv_numbering(path: Path, count: int) -> Rows:
    """Only the numbers of a CSV's `count` data rows, for messages about a table read column by column."""
    return Rows(path, [], range(1 + CSV_HEADER_LINES, count + 1 + CSV_HEADER_LINES))


def parquet_table(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"--dataset {path}: not a readable Parquet file: {str(exc).splitlines()[0]}") from None


def parquet_columns(path: Path) -> list[str]:
    try:
        return list(pq.read_schema(path).names)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"--dataset {path}: not a readable Parquet file: {str(exc).splitlines()[0]}") from None


def table_rows(path: Path, table: pa.Table) -> Rows:
    """A Parquet or Arrow table's rows, numbered from 1."""
    return Rows(path, table.to_pylist(), range(1, table.num_rows + 1))
