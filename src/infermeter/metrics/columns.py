"""Columnar view of a run's records: flat numpy arrays with offsets, so metrics never loop over requests."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from infermeter.errors import UserError
from infermeter.metrics.chunk_sizes import ChunkSizes
from infermeter.records import SCHEMA, RecordsFile, RequestRecord, read_records, read_run_info, records_to_table
from infermeter.records.reader import BATCH_ROWS
from infermeter.run_info import RunInfo, Tokenizer

Counting = Literal["A", "B"]  # the IETF draft's token counting options: A native (the server's), B reference


BLOCK_VALUES = 1 << 20  # values per block of requests in blockwise passes: temporaries stay small
PAIR_ROWS = BATCH_ROWS // 2  # the same for two list fields streamed side by side


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

    def owner(self) -> np.ndarray:
        """Index of the request each value belongs to."""
        return np.repeat(np.arange(len(self.offsets) - 1), self.lengths)

    def keep_requests(self, mask: np.ndarray) -> Ragged:
        """Drop the values of requests where mask is False (their lists become empty)."""
        if mask.all():
            return self
        lengths = np.where(mask, self.lengths, 0)
        return Ragged.from_lengths(lengths, self.values[: self.offsets[-1]][np.repeat(mask, self.lengths)])

    def select(self, value_mask: np.ndarray) -> Ragged:
        """Keep only the values where value_mask is True, each still owned by its request."""
        kept = segment_sum(value_mask, self.offsets)
        return Ragged.from_lengths(kept, self.values[: self.offsets[-1]][value_mask[: self.offsets[-1]]])

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

    def diffs(self, keep: np.ndarray | None = None, into: np.ndarray | None = None) -> Ragged:
        """Consecutive differences within each request (k values give k - 1 differences); with `keep`, only those
        of the requests where it holds (the others get none).  Computed a block of requests at a time, written to
        the start of `into` when given (room enough for them), else to a new array."""
        lengths = self.lengths
        out_lengths = np.maximum(lengths - 1, 0)
        if keep is not None:
            out_lengths[~keep] = 0
        total = int(out_lengths.sum())
        room = np.empty(total, dtype=self.values.dtype) if into is None else into[:total]
        out = Ragged.from_lengths(out_lengths, room)
        spans = blocks(self.offsets)
        widest = max((int(self.offsets[b] - self.offsets[a]) for a, b in spans), default=0)
        scratch, take = np.empty(widest, dtype=self.values.dtype), np.empty(widest, dtype=bool)  # reused per block
        for a, b in spans:
            lo, hi = self.offsets[a], self.offsets[b]
            if hi - lo < 2:
                continue
            d, t = scratch[: hi - lo - 1], take[: hi - lo - 1]
            np.subtract(self.values[lo + 1 : hi], self.values[lo : hi - 1], out=d)
            if keep is None:
                t[:] = True
            else:
                t[:] = np.repeat(keep[a:b], lengths[a:b])[:-1]
            starts = self.offsets[a + 1 : b]
            t[starts[(starts > lo) & (starts < hi)] - lo - 1] = False  # one request's last, the next one's first
            np.compress(t, d, out=out.values[out.offsets[a] : out.offsets[b]])
        return out


class _GapsOut:
    """Differences gathered a block of requests at a time into one array sized once (`room` values at most)."""

    def __init__(self, n: int, room: int) -> None:
        self.values = np.empty(room)
        self.lengths = np.zeros(n, dtype=np.int64)
        self.filled = 0

    def add(self, start: int, part: Ragged, keep: np.ndarray) -> None:
        """The differences of `part`, the requests from `start` on, of those where `keep` holds."""
        gaps = part.diffs(keep, into=self.values[self.filled :])
        self.lengths[start : start + len(gaps.lengths)] = gaps.lengths
        self.filled += len(gaps.values)

    def ragged(self) -> Ragged:
        return Ragged.from_lengths(self.lengths, self.values[: self.filled])


def blocks(offsets: np.ndarray, size: int | None = None) -> list[tuple[int, int]]:
    """Ranges [a, b) of requests holding about `size` values each (BLOCK_VALUES; one request may hold more)."""
    size = size or BLOCK_VALUES
    n = len(offsets) - 1
    if n == 0:
        return []
    cuts = np.searchsorted(offsets, np.arange(size, int(offsets[-1]), size), side="right") - 1
    edges = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return [(a, b) for a, b in itertools.pairwise(edges.tolist()) if b > a]


def distinct(labels: np.ndarray) -> list[str]:
    """The sorted distinct labels of an object array, read a block at a time (no list of every label at once)."""
    found: set[str] = set()
    for start in range(0, len(labels), BLOCK_VALUES):
        found.update(labels[start : start + BLOCK_VALUES].tolist())
    return sorted(found)


def segment_sum(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sum of each request's values: counts (booleans, integers) one reduction per request; floats by differences
    of one cumulative sum, as the summaries have always added them."""
    if values.dtype.kind in "biu":
        lengths = np.diff(offsets)
        out = np.zeros(len(lengths), dtype=np.int64)
        has = lengths > 0
        if has.any():
            out[has] = np.add.reduceat(values[: offsets[-1]], offsets[:-1][has], dtype=np.int64)
        return out
    cs = np.zeros(len(values) + 1, dtype=np.result_type(values.dtype, np.int64))
    np.cumsum(values, out=cs[1:])
    return cs[offsets[1:]] - cs[offsets[:-1]]


def segment_max(values: np.ndarray, offsets: np.ndarray, fill: float = np.nan) -> np.ndarray:
    lengths = np.diff(offsets)
    out = np.full(len(lengths), fill, dtype=float)
    has = lengths > 0
    if has.any():
        out[has] = np.maximum.reduceat(values[: offsets[-1]], offsets[:-1][has])
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

    Built from a table or a run directory, a field is read and converted the first time it is used: a summary
    that needs no chunk or server times never reads them, and list fields stay in Arrow's buffers (no copy).
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
        source = self.__dict__.get("_source")
        return source.rows if source is not None else len(self.request_id)  # no column read for a count

    @functools.cached_property
    def ok(self) -> np.ndarray:
        return self.status == "ok"

    def __getattr__(self, name: str) -> object:
        """A field not read yet: read it from the table or file the columns were made from."""
        source = self.__dict__.get("_source")
        make = _FIELDS.get(name)
        if source is None or make is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        value = make(source, self.counting)
        object.__setattr__(self, name, value)
        return value

    def one_body(self, name: Literal["completed_at", "inputs"]) -> np.ndarray:
        """A field that only replies of one body carry (embeddings, rerank) as floats, NaN where a record has none;
        columns built from arrays (a simulation's) have none at all: every reply of theirs is a token stream."""
        if name not in self.__dict__:
            source = self.__dict__.get("_source")
            value = np.full(self.n, np.nan) if source is None else _FIELDS[name](source, self.counting)
            object.__setattr__(self, name, value)
        out: np.ndarray = self.__dict__[name]
        return out

    def list_blocks(self, name: str, rows: int = BATCH_ROWS) -> Iterator[tuple[int, Ragged]]:
        """A list field (token_times, chunk_times, chunk_tokens, server_token_times) a block of requests at a time,
        as (its first request, the block): from the field when it is read already, else streamed from the records
        `rows` at a time without being kept."""
        field = _LISTS[name]
        if field in self.__dict__ or "_source" not in self.__dict__:
            whole: Ragged = getattr(self, field)
            for a, b in blocks(whole.offsets):
                lo, hi = whole.offsets[a], whole.offsets[b]
                yield a, Ragged(whole.offsets[a : b + 1] - lo, whole.values[lo:hi])
            return
        start = 0
        for lengths, values in self.__dict__["_source"].list_batches(name, rows):
            yield start, Ragged.from_lengths(lengths, values)
            start += len(lengths)

    def token_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Each request's first and last token time (NaN without tokens).  Read on their own, the token times are
        not differenced: ask for token_gaps first when both are wanted (one pass gives both)."""
        if "_token_ends" not in self.__dict__:
            if "tokens" in self.__dict__ or "_source" not in self.__dict__:
                object.__setattr__(self, "_token_ends", (self.tokens.first(), self.tokens.last()))
            else:
                self._stream_tokens(gaps=False)
        return self.__dict__["_token_ends"]

    def token_gaps(self) -> Ragged:
        """ITL option B's samples: the differences of consecutive token times within each ok request."""
        if "_token_gaps" not in self.__dict__:
            if "tokens" in self.__dict__ or "_source" not in self.__dict__:
                object.__setattr__(self, "_token_gaps", self.tokens.diffs(self.ok))
            else:
                self._stream_tokens(gaps=True)
        return self.__dict__["_token_gaps"]

    def chunk_gaps(self) -> Ragged:
        """ITL option A's samples: the differences of consecutive content-chunk times (chunks that carried a token)
        within each ok request."""
        if "_chunk_gaps" not in self.__dict__:
            if "_source" in self.__dict__ and not {"chunks", "chunk_tokens"} & self.__dict__.keys():
                gaps = self._stream_chunk_gaps()
            else:
                gaps = self.chunks.select(self.chunk_tokens.values > 0).diffs(self.ok)
            object.__setattr__(self, "_chunk_gaps", gaps)
        return self.__dict__["_chunk_gaps"]

    def _stream_tokens(self, gaps: bool) -> None:
        """token_ends, and with `gaps` token_gaps, in one pass over the records' token times, which are not kept (a
        summary needs no more of them)."""
        n, ok = self.n, self.ok
        first, last = np.full(n, np.nan), np.full(n, np.nan)
        out = _GapsOut(n, self.__dict__["_source"].room("token_times")) if gaps else None
        for start, part in self.list_blocks("token_times"):
            end = start + len(part.offsets) - 1
            first[start:end], last[start:end] = part.first(), part.last()
            if out is not None:
                out.add(start, part, ok[start:end])
        object.__setattr__(self, "_token_ends", (first, last))
        if out is not None:
            object.__setattr__(self, "_token_gaps", out.ragged())

    def chunk_sizes(self) -> ChunkSizes:
        """The content chunks of ok requests, counted (see ChunkSizes); option A's pass counts them on its way."""
        if "_chunk_sizes" not in self.__dict__:
            total = ChunkSizes()
            for start, part in self.list_blocks("chunk_tokens"):
                ok = self.ok[start : start + len(part.offsets) - 1]
                total = total + ChunkSizes.of(part.values, np.repeat(ok, part.lengths))
            object.__setattr__(self, "_chunk_sizes", total)
        return self.__dict__["_chunk_sizes"]

    def _stream_chunk_gaps(self) -> Ragged:
        """chunk_gaps (and chunk_sizes) in one pass over the records' chunk times and sizes, read side by side and
        not kept.  The same pass gives token_ends where every request's content chunks carry all its tokens (the
        records' output_tokens): a token's time is its chunk's (the record contract), so the first and last content
        chunk are the first and last token, and option A reads no token times."""
        ok, n = self.ok, self.n
        out = _GapsOut(n, self.__dict__["_source"].room("chunk_times"))
        first, last = np.full(n, np.nan), np.full(n, np.nan)
        received = self.server_output_tokens  # the records' own counts (not the reference tokenizer's)
        ends = "_token_ends" not in self.__dict__  # wanted, until a request's chunks do not carry all its tokens
        counted = ChunkSizes()
        rows = PAIR_ROWS  # two fields read side by side: half the rows of one, about the same bytes in flight
        pairs = zip(self.list_blocks("chunk_times", rows), self.list_blocks("chunk_tokens", rows), strict=True)
        for (start, times), (at, sizes) in pairs:
            if at != start or not np.array_equal(times.offsets, sizes.offsets):
                raise UserError("the run's records are damaged: chunk_times and chunk_tokens differ in length")
            end = start + len(times.offsets) - 1
            content = sizes.values > 0
            carried = times if content.all() else times.select(content)
            out.add(start, carried, ok[start:end])
            ends = ends and np.array_equal(segment_sum(sizes.values, sizes.offsets), received[start:end])
            if ends:
                first[start:end], last[start:end] = carried.first(), carried.last()
            counted = counted + ChunkSizes.of(sizes.values, np.repeat(ok[start:end], sizes.lengths))
        object.__setattr__(self, "_chunk_sizes", counted)
        if ends:
            object.__setattr__(self, "_token_ends", (first, last))
        return out.ragged()

    def any_server_times(self, mask: np.ndarray) -> bool:
        """Whether any request where mask holds carries server-reported token times (reads no more of the field
        than it takes to find one)."""
        if "has_server" in self.__dict__ or "_source" not in self.__dict__:
            return bool(np.any(self.has_server & mask))
        start = 0
        for valid in self.__dict__["_source"].valid_batches("server_token_times"):
            if np.any(valid & mask[start : start + len(valid)]):
                return True
            start += len(valid)
        return False

    @classmethod
    def _lazy(cls, source: _Source, counting: Counting) -> RecordColumns:
        cols = object.__new__(cls)
        object.__setattr__(cols, "_source", source)
        object.__setattr__(cols, "counting", counting)
        return cols

    @classmethod
    def from_table(cls, table: pa.Table, counting: Counting = "A") -> RecordColumns:
        """Columns whose token counts follow `counting` (a run's: `counting_of(info.tokenizer)`)."""
        return cls._lazy(_TableSource(table.select(SCHEMA.names)), counting)

    @classmethod
    def from_records(cls, records: list[RequestRecord], counting: Counting = "A") -> RecordColumns:
        return cls.from_table(records_to_table(records), counting)

    @classmethod
    def of_run(cls, run_dir: Path, info: RunInfo | None = None) -> RecordColumns:
        """A run directory's records, their tokens counted as its run.json declares.  A sealed run's fields are read
        from records.parquet as they are used (a damaged one raises UserError then)."""
        info = info if info is not None else read_run_info(run_dir)
        counting = counting_of(info.tokenizer)
        ramp = info.load.ramp_up_s
        file = RecordsFile.of_run(run_dir)
        if file is None or ramp:
            return cls.from_table(after_ramp(read_records(run_dir), ramp), counting)
        return cls._lazy(file, counting)


def after_ramp(table: pa.Table, ramp_up_s: float | None) -> pa.Table:
    """The records of requests scheduled once the ramp-up was over (--ramp-up: from the first send, the rate or the
    users still rising): the steady load a summary describes.  All of them without a ramp-up."""
    if not ramp_up_s or table.num_rows == 0:
        return table
    scheduled = table.column("scheduled_at").to_numpy()
    return table.filter(pa.array(scheduled >= scheduled.min() + ramp_up_s))


class _Source(Protocol):
    """Where RecordColumns reads a field: an in-memory table, or a RecordsFile."""

    rows: int

    def column(self, name: str) -> pa.ChunkedArray: ...

    def lists(self, name: str) -> tuple[np.ndarray, np.ndarray]: ...

    def list_batches(self, name: str, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...

    def room(self, name: str) -> int: ...

    def valid_batches(self, name: str) -> Iterator[np.ndarray]: ...


class _TableSource:
    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.rows = table.num_rows

    def column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name)

    def lists(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        arr = self.table.column(name).combine_chunks()
        lengths = arr.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        return lengths, arr.flatten().to_numpy(zero_copy_only=False)

    def list_batches(self, name: str, rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        yield self.lists(name)  # in memory already: one batch

    def room(self, name: str) -> int:
        return int(pc.sum(pc.list_value_length(self.table.column(name))).as_py() or 0)

    def valid_batches(self, name: str) -> Iterator[np.ndarray]:
        yield self.table.column(name).is_valid().to_numpy(zero_copy_only=False)


def _num(name: str, dtype: type) -> Callable[[_Source, Counting], np.ndarray]:
    return lambda src, _: src.column(name).to_numpy().astype(dtype, copy=False)


def _reported(name: str) -> Callable[[_Source, Counting], np.ndarray]:
    return lambda src, _: src.column(name).cast(pa.float64()).to_numpy()


def _strings(name: str) -> Callable[[_Source, Counting], np.ndarray]:
    def make(src: _Source, _: Counting) -> np.ndarray:
        col = src.column(name).combine_chunks().dictionary_encode()
        labels = np.asarray([*col.dictionary.to_pylist(), ""], dtype=object)  # the last: a null's label
        return labels[col.indices.fill_null(len(labels) - 1).to_numpy(zero_copy_only=False)]

    return make


def _ref(name: str) -> Callable[[_Source, Counting], np.ndarray]:
    return lambda src, _: src.column(name).fill_null(-1).to_numpy().astype(np.int64)


def _used(name: str) -> Callable[[_Source, Counting], np.ndarray]:
    """The count the metrics use: the reference tokenizer's under option B (the server's where there is none);
    under A the server's usage, else what the client knew (never null)."""

    def make(src: _Source, counting: Counting) -> np.ndarray:
        if counting == "B":
            return pc.coalesce(src.column(f"ref_{name}"), src.column(name)).to_numpy().astype(np.int64)
        return src.column(name).to_numpy().astype(np.int64, copy=False)

    return make


def _ragged(name: str, dtype: type | None = np.float64) -> Callable[[_Source, Counting], Ragged]:
    def make(src: _Source, _: Counting) -> Ragged:
        lengths, values = src.lists(name)
        return Ragged.from_lengths(lengths, values if dtype is None else values.astype(dtype, copy=False))

    return make


def _has_server(src: _Source, _: Counting) -> np.ndarray:
    return np.concatenate(list(src.valid_batches("server_token_times")))


_LISTS = {
    "token_times": "tokens",
    "chunk_times": "chunks",
    "chunk_tokens": "chunk_tokens",
    "server_token_times": "server",
}

_FIELDS: dict[str, Callable[[_Source, Counting], object]] = {
    "request_id": _num("request_id", np.int64),
    "request_class": _strings("request_class"),
    "input_tokens": _used("input_tokens"),
    "output_tokens": _used("output_tokens"),
    "max_tokens": _num("max_tokens", np.int64),
    "scheduled_at": _num("scheduled_at", np.float64),
    "submitted_at": _num("submitted_at", np.float64),
    "tokens": _ragged("token_times"),
    "chunks": _ragged("chunk_times"),
    "chunk_tokens": _ragged("chunk_tokens", None),  # int32 as stored: counts and shares only
    "server": _ragged("server_token_times"),
    "has_server": _has_server,
    "status": _strings("status"),
    "error": _strings("error"),
    "cached_tokens": _reported("cached_tokens"),
    "server_prefill_s": _reported("server_prefill_s"),
    "server_decode_s": _reported("server_decode_s"),
    "server_input_tokens": _num("input_tokens", np.int64),
    "server_output_tokens": _num("output_tokens", np.int64),
    "ref_input_tokens": _ref("ref_input_tokens"),
    "ref_output_tokens": _ref("ref_output_tokens"),
    "session_id": _ref("session_id"),  # -1 where none (read by metrics.breakdowns, not a field of every columns)
    "turn": _ref("turn"),
    "model": _strings("model"),
    "slot_wait_s": _reported("slot_wait_s"),
    "completed_at": _reported("completed_at"),  # NaN for streamed replies: their last token ends them
    "inputs": _reported("inputs"),  # NaN where the request carried no list of inputs (every generating API)
}
