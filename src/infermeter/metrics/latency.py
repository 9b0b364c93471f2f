"""Per-request latency metrics (DESIGN.md "Metric definitions"): TTFT, ITL, TPOT, E2E, jitter, max pause.

All functions take RecordColumns and return per-request arrays in seconds, NaN where a metric is undefined
(failed request, too few tokens).  ITL samples come back as Ragged, one list per request.  A reply that is one body,
not a token stream (embeddings, rerank), has no token times: its latency ends at `completed_at`, and every token
metric (TTFT, ITL, TPOT, normalized latency, jitter, max pause) is NaN for it: absent, never zero.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from infermeter.metrics.columns import Ragged, RecordColumns, blocks, segment_max

ItlOption = Literal["A", "B", "C"]

# draft 5.1.4.2: TTFT reported by input-length bucket
INPUT_BUCKETS: tuple[tuple[int, int | None], ...] = (
    (0, 256),
    (256, 512),
    (512, 1024),
    (1024, 2048),
    (2048, 4096),
    (4096, None),
)


def bucket_label(lo: int, hi: int | None) -> str:
    return f"{lo}-{hi}" if hi is not None else f"{lo}+"


def content_chunks(cols: RecordColumns) -> Ragged:
    """Chunk times of events that carried at least one token (empty events never count)."""
    return cols.chunks.select(cols.chunk_tokens.values > 0)


def first_token_time(cols: RecordColumns) -> np.ndarray:
    return cols.token_ends()[0]


def last_token_time(cols: RecordColumns) -> np.ndarray:
    return cols.token_ends()[1]


def completion_time(cols: RecordColumns) -> np.ndarray:
    """When each reply ended: its last token, or where it has no token times the arrival of its one body's last byte
    (`completed_at`); NaN when neither is known."""
    last = last_token_time(cols)
    ended = np.isnan(last)
    if not ended.any():  # every reply streamed tokens: completed_at is not even read
        return last
    return np.where(ended, cols.one_body("completed_at"), last)


def ttft(cols: RecordColumns) -> np.ndarray:
    """First content token arrival - submission (draft 5.1.3); NaN for failed or tokenless requests."""
    return np.where(cols.ok, first_token_time(cols) - cols.submitted_at, np.nan)


def e2e(cols: RecordColumns) -> np.ndarray:
    """The request's latency: its reply's end (last token, or the one body's last byte) - submission; NaN for failed
    requests and for streamed ones that delivered no token."""
    return np.where(cols.ok, completion_time(cols) - cols.submitted_at, np.nan)


def tpot(cols: RecordColumns) -> np.ndarray:
    """(E2E - TTFT) / (output_tokens - 1), defined only for requests with at least two output tokens (vLLM)."""
    n_out = cols.output_tokens.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (e2e(cols) - ttft(cols)) / (n_out - 1)
    return np.where(n_out >= 2, value, np.nan)


def normalized_latency(cols: RecordColumns) -> np.ndarray:
    """E2E / output_tokens: seconds per generated token, end to end."""
    n_out = cols.output_tokens.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_out >= 1, e2e(cols) / n_out, np.nan)


def itl(cols: RecordColumns, option: ItlOption = "B") -> Ragged:
    """Inter-token latency samples of each successful request (TTFT is never one of them).

    A: gaps between content-bearing chunks ("time between chunks").  B: gaps between token_times, where every
    token of a chunk carries the chunk's time, so a k-token chunk adds k - 1 zero gaps.  C: gaps between the
    server-reported token times; requests without them fall back to B.
    """
    if option == "B":
        return cols.token_gaps()
    if option == "A":
        return cols.chunk_gaps()
    return token_times(cols, option).diffs(cols.ok)


def token_times(cols: RecordColumns, option: ItlOption = "B") -> Ragged:
    """Every token's time: as received (A and B), or as the server reports it where it does (C)."""
    if option in ("A", "B"):
        return cols.tokens
    if option == "C":
        use_server = cols.server.lengths > 0  # a null list has none
        return _merge(cols.server, cols.tokens, use_server)
    raise ValueError(f"ITL option must be A, B or C, got {option!r}")


def _merge(primary: Ragged, fallback: Ragged, use_primary: np.ndarray) -> Ragged:
    """Per request, primary's list where use_primary holds, else fallback's."""
    a = primary.keep_requests(use_primary)
    b = fallback.keep_requests(~use_primary)
    lengths = a.lengths + b.lengths
    take_a = np.repeat(use_primary, lengths)
    values = np.empty(int(lengths.sum()))
    values[take_a] = a.values
    values[~take_a] = b.values
    return Ragged.from_lengths(lengths, values)


def jitter(samples: Ragged) -> np.ndarray:
    """Per-request standard deviation of ITL (population form); NaN below two samples (draft 5.4.3 e).

    A block of requests at a time, so the deviations never take a copy of every sample; the sums are differences of
    cumulative sums carried from block to block, the very floats one cumulative sum over all samples gives."""
    counts = samples.lengths
    var = np.full(len(counts), np.nan)
    carried = [0.0, 0.0]  # the cumulative sums of the values and of the squared deviations, before the block

    def sums(values: np.ndarray, offsets: np.ndarray, which: int) -> np.ndarray:
        running = np.empty(len(values) + 1)
        running[0] = carried[which]
        running[1:] = values
        np.cumsum(running, out=running)
        carried[which] = float(running[-1])
        return running[offsets[1:]] - running[offsets[:-1]]

    with np.errstate(invalid="ignore", divide="ignore"):
        for a, b in blocks(samples.offsets):
            lo, hi = samples.offsets[a], samples.offsets[b]
            values, offsets, n = samples.values[lo:hi], samples.offsets[a : b + 1] - lo, counts[a:b]
            mean = sums(values, offsets, 0) / n
            dev = np.repeat(np.nan_to_num(mean), n)
            np.subtract(values, dev, out=dev)
            np.multiply(dev, dev, out=dev)
            var[a:b] = sums(dev, offsets, 1) / n
    return np.where(counts >= 2, np.sqrt(var), np.nan)


def max_pause(samples: Ragged) -> np.ndarray:
    """Per-request largest ITL (draft 5.4.3 f); NaN without samples."""
    return segment_max(samples.values, samples.offsets)


def input_bucket_index(input_tokens: np.ndarray) -> np.ndarray:
    """Index into INPUT_BUCKETS of each request's input length."""
    edges = np.asarray([lo for lo, _ in INPUT_BUCKETS[1:]])
    return np.searchsorted(edges, input_tokens, side="right")
