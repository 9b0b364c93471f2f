"""A simulated run's records written as its requests finish: a journal of chunks, sealed into records.parquet.

`RecordStream` is the simulator's emission sink.  It buffers emission rows in compact typed arrays and, each time
the first `chunk` requests of the workload not yet written are all done, writes their records to the run's
journal (the same Arrow stream a live run appends to, so an interrupted simulation keeps what it wrote) and drops
their rows.  Records stay in workload order, as a run written in one piece has them; only the requests finished
ahead of an unfinished earlier one wait in memory, 32 bytes of rows each.  What the summary needs is kept per
request: first and last token time and token count, and in `endpoints` mode each request's jitter and max pause
with the ITL samples of the emission runs (in `full` mode, every token time).  `seal` turns the journal into
records.parquet batch by batch, never the whole table at once.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from infermeter.metrics.columns import Ragged
from infermeter.records import JOURNAL, LATER_FIELDS, RECORDS, ROW_GROUP, SCHEMA
from infermeter.sim.tokens import Emissions, ItlSamples, TokenEnds, joined
from infermeter.workload.spec import Requests

Mode = Literal["full", "endpoints"]
CHUNK = 4 * ROW_GROUP  # requests per journal batch: a multiple of the row group keeps the groups aligned
# dictionary encoding only where it pays: on every other column Parquet tries it and gives up, at 3x the time
DICTIONARY = ["request_class", "status", "error", "finish_reason"]


def _list_array(r: Ragged, dtype: pa.DataType) -> pa.ListArray:
    offsets = pa.array(r.offsets.astype(np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(r.values, type=dtype))


def rejected_in(rejected: dict[int, str], lo: int, hi: int) -> list[tuple[int, str]]:
    """The refused requests among lo .. hi - 1, in order, with their reasons."""
    if len(rejected) > hi - lo:
        return [(i, rejected[i]) for i in range(lo, hi) if i in rejected]
    return sorted((i, r) for i, r in rejected.items() if lo <= i < hi)


def _strings(values: np.ndarray) -> pa.Array:
    """Strings of an object array (converted with str() when any is not a str)."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array(values.astype(str))


def _constant(value: str, n: int) -> pa.Array:
    """n copies of one string, built straight from Arrow's buffers."""
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def records_of(
    requests: Requests,
    lo: int,
    times: Ragged,
    counts: np.ndarray,
    sent: np.ndarray,
    rejected: list[tuple[int, str]],
) -> pa.Table:
    """RequestRecords of requests lo .. lo + len(counts) - 1 (`rejected`: those of them refused, with the reason);
    every token is its own SSE event at the engine's time."""
    n = len(counts)
    hi = lo + n
    token_list = _list_array(times, pa.float64())
    ones = Ragged(times.offsets, np.ones(len(times.values), dtype=np.int32))
    if here := rejected:
        status_of, error_of = np.full(n, "ok", dtype=object), np.full(n, "", dtype=object)
        for idx, reason in here:
            status_of[idx - lo], error_of[idx - lo] = "error", reason
        status, error = _strings(status_of), _strings(error_of)
    else:
        status, error = _constant("ok", n), _constant("", n)
    classes = requests.request_class[lo:hi]
    sent_at = pa.array(sent.astype(float, copy=False))
    cols = {
        "request_id": pa.array(np.arange(lo, hi, dtype=np.int64)),
        "request_class": _strings(classes) if classes.dtype == object else pa.array(classes.astype(str)),
        "input_tokens": pa.array(requests.input_tokens[lo:hi].astype(np.int32)),
        "output_tokens": pa.array(counts.astype(np.int32)),
        "max_tokens": pa.array(requests.output_tokens[lo:hi].astype(np.int32)),
        "scheduled_at": sent_at,
        "submitted_at": sent_at,
        "token_times": token_list,
        "chunk_times": token_list,
        "chunk_tokens": _list_array(ones, pa.int32()),
        "server_token_times": pa.nulls(n, pa.list_(pa.float64())),
        "status": status,
        "error": error,
        # no text, no tokenizer, no server: the workload's counts are the counts, and nothing is reported
        **{name: pa.nulls(n, SCHEMA.field(name).type) for name in LATER_FIELDS},
    }
    return pa.Table.from_pydict(cols, schema=SCHEMA)


@dataclass
class RunItl:
    """ITL of the emission runs, for records that hold first and last token times only: the samples as (value,
    weight) in `Emissions.itl_weighted`'s order, and each request's jitter and max pause (NaN without samples)."""

    value: np.ndarray
    weight: np.ndarray
    jitter: np.ndarray
    max_pause: np.ndarray


@dataclass
class Streamed:
    """What a written run's summary is computed from, for every request in workload order."""

    ends: TokenEnds
    times: Ragged  # the token times the records hold (every token, or first and last)
    itl: RunItl | None  # endpoints mode only


def request_itl(samples: ItlSamples, served: np.ndarray) -> tuple[ItlSamples, np.ndarray, np.ndarray]:
    """The samples of served requests (owners numbered 0 .. len(served) - 1), with each request's jitter (the
    weighted population standard deviation of its gaps, NaN under two) and max pause (NaN without gaps)."""
    owner, value, weight = samples
    keep = served[owner]
    owner, value, weight = owner[keep], value[keep], weight[keep]
    n = len(served)
    w = np.bincount(owner, weights=weight, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(owner, weights=weight * value, minlength=n) / w
        var = np.bincount(owner, weights=weight * (value - mean[owner]) ** 2, minlength=n) / w
    max_pause = np.full(n, -np.inf)
    np.maximum.at(max_pause, owner, value)
    return (owner, value, weight), np.where(w >= 2, np.sqrt(var), np.nan), np.where(w >= 1, max_pause, np.nan)


def _small(values: np.ndarray) -> np.ndarray:
    """Whole numbers as int32 when they fit (ITL weights are kept until the summary: 12 bytes a sample, not 16)."""
    return values.astype(np.int32) if len(values) == 0 or int(values.max()) < 2**31 else values


class RecordStream:
    """The emission sink of a simulation written to `run_dir` (whose run.json is written): see the module doc."""

    def __init__(self, requests: Requests, run_dir: Path, mode: Mode, chunk: int = CHUNK) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        self.requests = requests
        self.run_dir = run_dir
        self.mode = mode
        self.chunk = chunk
        self.n = n = len(requests)
        self.sent = np.zeros(n)
        self.rejected: dict[int, str] = {}
        self.owner, self.first, self.interval, self.count = array("q"), array("d"), array("d"), array("q")
        self.is_done = bytearray(n)
        self.front = 0  # every request before it is done
        self.written = 0  # every request before it is in the journal
        # np.empty: pages are touched (and count in memory) only as chunks fill them.  First and last token side by
        # side, as the endpoint records list them: when every request has two or more tokens they are those values.
        self._ends = np.empty((n, 2))
        self._count = np.empty(n, dtype=np.int32)  # tokens of one request: MAX_LENGTH at most
        self._times: list[np.ndarray] = []
        self._parts: tuple[list[np.ndarray], ...] = ([], [], [], [])  # value and weight inside runs, between runs
        self._jitter = np.empty(n) if mode == "endpoints" else np.zeros(0)
        self._max_pause = np.empty(n) if mode == "endpoints" else np.zeros(0)
        self._sink = pa.OSFile(str(run_dir / JOURNAL), "wb")
        self._journal = pa.ipc.new_stream(self._sink, SCHEMA)

    @property
    def ends(self) -> TokenEnds:
        return TokenEnds(self._ends[:, 0], self._ends[:, 1], self._count)

    # ----- the simulator's side (EmissionSink)

    def start(self, sent: np.ndarray, rejected: dict[int, str]) -> None:
        self.sent, self.rejected = sent, rejected

    def add_runs(self, owners: list[int], first: list[float], interval: list[float], count: list[int]) -> None:
        self.owner.extend(owners)
        self.first.extend(first)
        self.interval.extend(interval)
        self.count.extend(count)

    def done(self, idxs: list[int]) -> None:
        flags = self.is_done
        for idx in idxs:
            flags[idx] = 1
        front, n = self.front, self.n
        while front < n and flags[front]:
            front += 1
        self.front = front
        while front - self.written >= self.chunk:
            self._flush(self.written + self.chunk)

    def close(self) -> TokenEnds:
        """Write what is left (every request must be done); returns each request's token ends."""
        assert self.front == self.n, f"{self.n - self.front} requests never finished"
        if self.written < self.n:
            self._flush(self.n)
        return self.ends

    def _flush(self, hi: int) -> None:
        """Journal requests written .. hi - 1 (all done) and drop their rows from the buffer."""
        owner = np.frombuffer(self.owner, dtype=np.int64)
        first = np.frombuffer(self.first, dtype=float)
        interval = np.frombuffer(self.interval, dtype=float)
        count = np.frombuffer(self.count, dtype=np.int64)
        out = owner < hi  # every row of these requests is in (they are done); the rest belong to later requests
        order = np.argsort(owner[out], kind="stable")  # rows came in time order: each request stays in time order
        lo = self.written
        rows = Emissions(hi - lo, owner[out][order] - lo, first[out][order], interval[out][order], count[out][order])
        owner_kept, first_kept, interval_kept, count_kept = (a[~out].tobytes() for a in (owner, first, interval, count))
        del owner, first, interval, count  # release the buffers before replacing them
        self.owner, self.count = array("q", owner_kept), array("q", count_kept)
        self.first, self.interval = array("d", first_kept), array("d", interval_kept)
        self.write_rows(lo, rows)

    # ----- writing

    def write_rows(self, lo: int, rows: Emissions) -> None:
        """Journal the records of requests lo .. lo + rows.n - 1, given all their emission rows (renumbered from 0)."""
        hi = lo + rows.n
        ends = rows.ends()
        self._ends[lo:hi, 0], self._ends[lo:hi, 1], self._count[lo:hi] = ends.first, ends.last, ends.count
        rejected = rejected_in(self.rejected, lo, hi)
        if self.mode == "full":
            times = rows.token_times()
            self._times.append(times.values)
        else:
            times = ends.endpoint_times()
            self._keep_itl(lo, rows, rejected)
        self._journal.write_table(records_of(self.requests, lo, times, ends.count, self.sent[lo:hi], rejected))
        self.written = hi

    def _keep_itl(self, lo: int, rows: Emissions, rejected: list[tuple[int, str]]) -> None:
        """Each request's jitter and max pause, and the ITL samples of served requests for the summary."""
        served = np.ones(rows.n, dtype=bool)
        served[[i - lo for i, _ in rejected]] = False
        inside, between = rows.itl_parts()
        kept, jitter, max_pause = request_itl(joined(inside, between), served)
        self._jitter[lo : lo + rows.n], self._max_pause[lo : lo + rows.n] = jitter, max_pause
        _, value, weight = kept
        k = int(np.count_nonzero(served[inside[0]]))  # the kept samples inside runs come first
        for part, values in zip(self._parts, (value[:k], weight[:k], value[k:], weight[k:]), strict=True):
            part.append(_small(values) if values.dtype.kind == "i" else values)

    def write_all(self, emissions: Emissions, sent: np.ndarray, rejected: dict[int, str]) -> TokenEnds:
        """A whole simulation's rows at once (sorted by request), journaled chunk by chunk."""
        self.start(sent, rejected)
        for lo in range(0, self.n, self.chunk):
            self.write_rows(lo, emissions.requests(lo, min(lo + self.chunk, self.n)))
        self.front = self.n
        return self.ends

    def seal(self) -> Streamed:
        """Turn the journal into records.parquet, one batch at a time; returns what the summary is computed from."""
        self._journal.close()
        self._sink.close()
        journal, tmp = self.run_dir / JOURNAL, self.run_dir / (RECORDS + ".tmp")
        with (
            pa.OSFile(str(journal), "rb") as src,
            pq.ParquetWriter(tmp, SCHEMA, compression="zstd", use_dictionary=DICTIONARY) as out,
        ):
            for batch in pa.ipc.open_stream(src):
                out.write_table(pa.Table.from_batches([batch]), row_group_size=ROW_GROUP)
        os.replace(tmp, self.run_dir / RECORDS)
        journal.unlink()
        ends = self.ends
        itl = None
        if self.mode == "full":
            values = np.concatenate(self._times) if self._times else np.zeros(0)
            times = Ragged.from_lengths(ends.count, values)
        else:
            if len(ends.count) and int(ends.count.min()) >= 2:  # the side-by-side ends are the records' times
                times = Ragged(np.arange(0, 2 * self.n + 1, 2, dtype=np.int64), self._ends.reshape(-1))
            else:
                times = ends.endpoint_times()
            inside_v, inside_w, between_v, between_w = (
                np.concatenate(part) if part else np.zeros(0, dtype=np.int32 if k % 2 else float)
                for k, part in enumerate(self._parts)
            )
            itl = RunItl(
                np.concatenate([inside_v, between_v]),
                np.concatenate([inside_w, between_w]),
                self._jitter,
                self._max_pause,
            )
        self._times, self._parts = [], ([], [], [], [])
        return Streamed(ends, times, itl)
