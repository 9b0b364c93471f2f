"""Trace loaders: BurstGPT CSVs (timestamps and lengths) and plain length CSVs, read as Requests.

BurstGPT's columns are `Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type`; rows with
zero response tokens are failed requests in that dataset and are skipped unless asked for.  Rows are sorted
by timestamp so arrivals replay in order; arrival offsets are (t - t0) / rps_scale (seeds/004 RPS scaling).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infermeter.errors import UserError
from infermeter.workload.arrivals import ArrivalSpec, arrival_offsets
from infermeter.workload.csv_columns import int_column, number_column, read_csv
from infermeter.workload.distributions import MAX_LENGTH
from infermeter.workload.spec import Requests

BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens")
BURSTGPT_RATE = 0.27  # requests/s: BurstGPT's own mean arrival rate (multi-bin dynamic batching, section 3)
LEVELS: dict[str, float] = {"high": 100.0, "medium": 10.0, "low": 1.0}  # its load levels: RPS scaling (section 7.2)


@dataclass(frozen=True)
class _BurstGPT:
    """A BurstGPT file's checked columns (read-only arrays), kept so one command reads and parses a trace once."""

    timestamps: np.ndarray
    inputs: np.ndarray
    outputs: np.ndarray
    models: np.ndarray


@functools.lru_cache(maxsize=4)
def _burstgpt_columns(path: Path, version: tuple[int, int]) -> _BurstGPT:
    """The columns of `path` at `version` (its mtime and size: an edited file is read again)."""
    table = read_csv(path)
    missing = [c for c in BURSTGPT_COLUMNS if c not in table.column_names]
    if missing:
        raise UserError(f"{path} is not a BurstGPT CSV: missing column(s) {', '.join(missing)}")
    columns = _BurstGPT(
        number_column(table, "Timestamp", path),
        int_column(table, "Request tokens", path, MAX_LENGTH),
        int_column(table, "Response tokens", path, MAX_LENGTH),
        np.asarray(table.column("Model").to_pylist(), dtype=object),
    )
    for array in (columns.timestamps, columns.inputs, columns.outputs, columns.models):
        array.flags.writeable = False
    return columns


def _columns(path: Path) -> _BurstGPT:
    try:
        stat = path.stat()
        version = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        version = (0, 0)  # read_csv names what is wrong (a failed read is not cached)
    return _burstgpt_columns(path.resolve(), version)


def _usable(c: _BurstGPT, model: str | None, keep_failed: bool) -> np.ndarray:
    keep = c.inputs > 0
    if model is not None:
        keep &= c.models == model
    if not keep_failed:
        keep &= c.outputs > 0
    return keep


def load_burstgpt(
    path: Path,
    n: int | None = None,
    rps_scale: float = 1.0,
    model: str | None = None,
    keep_failed: bool = False,
) -> Requests:
    """Read a BurstGPT CSV as requests whose arrivals replay the trace, compressed rps_scale times."""
    c = _columns(path)
    ts, inputs, outputs, models = c.timestamps, c.inputs, c.outputs, c.models
    keep = _usable(c, model, keep_failed)
    order = np.flatnonzero(keep)[np.argsort(ts[keep], kind="stable")]
    if len(order) == 0:
        raise UserError(f"{path} has no usable requests (model filter: {model or 'none'})")
    if n is not None:
        if n > len(order):
            raise UserError(
                f"{path} has {len(order)} usable requests, fewer than the {n} asked for: ask for at most {len(order)}"
            )
        order = order[:n]
    count = len(order)
    arrivals = arrival_offsets(ArrivalSpec(kind="trace", time_scale=rps_scale), count, 0, ts[order])
    return Requests(
        request_class=models[order],
        input_tokens=inputs[order],
        output_tokens=np.maximum(outputs[order], 1),
        prefix_id=np.full(count, -1, dtype=np.int64),
        prefix_tokens=np.zeros(count, dtype=np.int64),
        arrival_s=arrivals,
    )


def load_length_csv(path: Path, input_column: str = "input_tokens", output_column: str = "output_tokens") -> Requests:
    """Read a CSV of (input, output) lengths, one request per row, in file order."""
    table = read_csv(path)
    for col in (input_column, output_column):
        if col not in table.column_names:
            raise UserError(f"{path} has no column '{col}' (columns: {', '.join(table.column_names)})")
    inputs = int_column(table, input_column, path, MAX_LENGTH)
    outputs = int_column(table, output_column, path, MAX_LENGTH)
    classes = (
        np.asarray(table.column("request_class").to_pylist(), dtype=object)
        if "request_class" in table.column_names
        else np.full(len(inputs), "", dtype=object)
    )
    n = len(inputs)
    return Requests(classes, inputs, outputs, np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64))


def offered_rate(requests: Requests) -> float:
    """A trace's own mean arrival rate, requests/s: how many arrivals per second of its span (`rps_scale` times it
    is the rate it is replayed at)."""
    span = float(requests.arrival_s[-1] - requests.arrival_s[0]) if len(requests.arrival_s) > 1 else 0.0
    if span <= 0:
        raise UserError("the trace's requests all arrive at the same instant: it has no rate to scale")
    return (len(requests) - 1) / span
