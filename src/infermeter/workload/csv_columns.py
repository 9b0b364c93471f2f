"""Columns of CSV files as checked numbers: one reader for traces and length files, naming the first bad row."""

from __future__ import annotations

from pathlib import Path
from typing import SupportsFloat, SupportsIndex

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from infermeter.errors import UserError


def read_csv(path: Path, what: str = "a CSV trace") -> pa.Table:
    """The whole file as a table; a missing or unreadable file is a one-line error."""
    if not path.is_file():
        raise UserError(f"{path} does not exist: give the path of {what}")
    try:
        return pacsv.read_csv(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"{path} is not a readable CSV: {str(exc).splitlines()[0]}") from None


def number_column(table: pa.Table, name: str, path: Path, whole_up_to: int | None = None) -> np.ndarray:
    """A column as finite floats (whole numbers from 0 to `whole_up_to` when given); the first bad row named."""
    raw = table.column(name).to_numpy(zero_copy_only=False)
    try:
        x = np.asarray(raw, dtype=float)
    except (ValueError, TypeError):
        x = np.asarray([_float_or_nan(v) for v in raw], dtype=float)
    bad = ~np.isfinite(x)
    if whole_up_to is not None:
        bad |= (x < 0) | (x > whole_up_to) | (x != np.round(x))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        need = f"whole numbers from 0 to {whole_up_to:,}" if whole_up_to is not None else "finite numbers"
        value = raw[row]
        shown = repr(value) if isinstance(value, str) else "nothing" if value is None else str(value)
        raise UserError(f"{path} column '{name}' must hold {need}: row {row + 2} holds {shown}")
    return x


def int_column(table: pa.Table, name: str, path: Path, limit: int) -> np.ndarray:
    """A column of whole numbers from 0 to `limit`."""
    return number_column(table, name, path, whole_up_to=limit).astype(np.int64)


def _float_or_nan(value: object) -> float:
    if not isinstance(value, str | bytes | bytearray | SupportsFloat | SupportsIndex):  # None, a date: no number
        return float("nan")
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
