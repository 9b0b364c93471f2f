"""Columnar view of a run's records: flat numpy arrays with offsets, so metrics never loop over requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infermeter.records import SCHEMA, RequestRecord, read_records, read_run_info, records_to_table
from infermeter.run_info import RunInfo, Tokenizer

Counting = Literal["A", "B"]  # the IETF draft's token counting options: A native (the server's), B reference


@dataclass(frozen=True)
class Ragged:
    """Per-request lists stored flat: request i owns values[offsets[i]:offsets[i+1]]."""

    offsets: np.ndarray  # int64, length n + 1, offsets[0] == 0
    values: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def from_lengths(cls, lengths: np.ndarray, values: np.ndarray) -> Ragged:
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(offsets, values)

    @classmethod
    def from_arrow(cls, column: pa.ChunkedArray | pa.Array, dtype: type = np.float64) -> Ragged:
        arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        lengths = arr.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        values = arr.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
        return cls.from_lengths(lengths, values)

    def owner(self) -> np.ndarray:
        """Index of the request each value belongs to."""
        return np.repeat(np.arange(len(self.offsets) - 1), self.lengths)

    def keep_requests(self, mask: np.ndarray) -> Ragged:
        """Drop the values of requests where mask is False (their lists become empty)."""
        if mask.all():
            return self
        return self.select(np.repeat(mask, self.lengths))

    def select(self, value_mask: np.ndarray) -> Ragged:
        """Keep only the values where value_mask is True, each still owned by its request."""
        kept = segment_sum(value_mask.astype(np.int64), self.offsets)
        return Ragged.from_lengths(kept, self.values[value_mask])

    def first(self, fill: float = np.nan) -> np.ndarray:
        out = np.full(len(self.offsets) - 1, fill, dtype=float)
        has = self.lengths > 0
        out[has] = self.values[self.offsets[:-1][has]]
        return out

    def last(self, fill: float = np.nan) -> np.ndarray:
        out = np.full(len(self.offsets) - 1, fill, dtype=float)
        has = self.lengths > 0
        out[has] = self.values[self.offsets[1:][has] - 1]
        return out

    def diffs(self) -> Ragged:
        """Consecutive differences within each request (k values give k - 1 differences)."""
        lengths = self.lengths
        if len(self.values) == 0:
            return Ragged.from_lengths(np.zeros_like(lengths), np.zeros(0))
        d = np.diff(self.values)
        within = np.ones(len(d), dtype=bool)
        starts = self.offsets[1:-1]
        within[starts[(starts > 0) & (starts < len(self.values))] - 1] = False
        return Ragged.from_lengths(np.maximum(lengths - 1, 0), d[within])


def segment_sum(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum of each request's values, by differences of one cumulative sum."""
    cs = np.zeros(len(values) + 1, dtype=np.result_type(values.dtype, np.int64))
    np.cumsum(values, out=cs[1:])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def segment_max(values: np.ndarray, offsets: np.ndarray, fill: float = np.nan) -> np.ndarray:
    lengths = np.diff(offsets)
    out = np.full(len(lengths), fill, dtype=float)
    has = lengths > 0
    if has.any():
        out[has] = np.maximum.reduceat(values, offsets[:-1][has])
    return out


def counting_of(tokenizer: Tokenizer) -> Counting:
    """The counting option a run's run.json declares (runs that declare none counted the server's usage: A)."""
    return "B" if tokenizer.counting_method == "B" else "A"


@dataclass(frozen=True)
class RecordColumns:
    """All record fields as arrays; `ok` marks requests with status "ok".

    `input_tokens` / `output_tokens` are the counts the metrics use, by `counting`: the records' server-reported
    counts (option A), or their counts under the run's reference tokenizer (option B), the server's where a record
    has none (older runs, simulated ones).  Both are kept: `server_*` and `ref_*` (-1 where there is none).
    """

    request_id: np.ndarray
    request_class: np.ndarray  # object array of str
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    max_tokens: np.ndarray
    scheduled_at: np.ndarray
    submitted_at: np.ndarray
    tokens: Ragged
    chunks: Ragged
    chunk_tokens: Ragged
    server: Ragged
    has_server: np.ndarray
    status: np.ndarray  # object array of str
    error: np.ndarray
    cached_tokens: np.ndarray  # float, NaN where the server did not report it (as the two below)
    server_prefill_s: np.ndarray
    server_decode_s: np.ndarray
    server_input_tokens: np.ndarray
    server_output_tokens: np.ndarray
    ref_input_tokens: np.ndarray
    ref_output_tokens: np.ndarray
    counting: Counting = "A"

    @property
    def n(self) -> int:
        return len(self.request_id)

    @property
    def ok(self) -> np.ndarray:
        return self.status == "ok"

    @classmethod
    def from_table(cls, table: pa.Table, counting: Counting = "A") -> RecordColumns:
        """Columns whose token counts follow `counting` (a run's: `counting_of(info.tokenizer)`)."""
        t = table.select(SCHEMA.names)

        def num(name: str, dtype: type) -> np.ndarray:
            return t.column(name).to_numpy().astype(dtype, copy=False)

        def reported(name: str) -> np.ndarray:
            return t.column(name).cast(pa.float64()).to_numpy()

        def strings(name: str) -> np.ndarray:
            col = t.column(name).combine_chunks().dictionary_encode()
            labels = np.asarray(col.dictionary.to_pylist(), dtype=object)
            return (
                labels[col.indices.fill_null(0).to_numpy(zero_copy_only=False)]
                if len(labels)
                else np.full(len(col), "", dtype=object)
            )

        server_col = t.column("server_token_times").combine_chunks()
        ref_in, ref_out = t.column("ref_input_tokens"), t.column("ref_output_tokens")
        if counting == "B":
            used_in = pc.coalesce(ref_in, t.column("input_tokens")).to_numpy().astype(np.int64)
            used_out = pc.coalesce(ref_out, t.column("output_tokens")).to_numpy().astype(np.int64)
        else:  # never null: the server's usage, else what the client knew (the built length, the streamed events)
            used_in, used_out = num("input_tokens", np.int64), num("output_tokens", np.int64)
        return cls(
            request_id=num("request_id", np.int64),
            request_class=strings("request_class"),
            input_tokens=used_in,
            output_tokens=used_out,
            max_tokens=num("max_tokens", np.int64),
            scheduled_at=num("scheduled_at", np.float64),
            submitted_at=num("submitted_at", np.float64),
            tokens=Ragged.from_arrow(t.column("token_times")),
            chunks=Ragged.from_arrow(t.column("chunk_times")),
            chunk_tokens=Ragged.from_arrow(t.column("chunk_tokens"), np.int64),
            server=Ragged.from_arrow(server_col),
            has_server=server_col.is_valid().to_numpy(zero_copy_only=False),
            status=strings("status"),
            error=strings("error"),
            cached_tokens=reported("cached_tokens"),
            server_prefill_s=reported("server_prefill_s"),
            server_decode_s=reported("server_decode_s"),
            server_input_tokens=num("input_tokens", np.int64),
            server_output_tokens=num("output_tokens", np.int64),
            ref_input_tokens=ref_in.fill_null(-1).to_numpy().astype(np.int64),
            ref_output_tokens=ref_out.fill_null(-1).to_numpy().astype(np.int64),
            counting=counting,
        )

    @classmethod
    def from_records(cls, records: list[RequestRecord], counting: Counting = "A") -> RecordColumns:
        return cls.from_table(records_to_table(records), counting)

    @classmethod
    def of_run(cls, run_dir: Path, info: RunInfo | None = None) -> RecordColumns:
        """A run directory's records, their tokens counted as its run.json declares."""
        info = info if info is not None else read_run_info(run_dir)
        return cls.from_table(read_records(run_dir), counting_of(info.tokenizer))
