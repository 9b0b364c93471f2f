"""Throughput over the measurement window: first submission to last completion (warm-up is never in records)."""

from __future__ import annotations

import numpy as np

from infermeter.metrics.columns import RecordColumns
from infermeter.metrics.latency import completion_time
from infermeter.metrics.summary_model import Throughput


def measurement_window(cols: RecordColumns) -> tuple[float, float]:
    """(start, end): the first submission and the last completion of any successful request (its last token, or the
    last byte of a reply that is one body: embeddings, rerank).

    With no successful request the window ends at the last submission, so rates come out as zero, not NaN.
    """
    if cols.n == 0:
        return 0.0, 0.0
    start = float(np.min(cols.submitted_at))
    done = completion_time(cols)[cols.ok]
    done = done[np.isfinite(done)]
    end = float(done.max()) if len(done) else float(np.max(cols.submitted_at))
    return start, max(end, start)


def throughput(cols: RecordColumns, window_s: float) -> Throughput:
    """Output tokens, input tokens and requests of successful requests per second of the window (requests without a
    token stream count in input tokens and requests; their output tokens are 0)."""
    ok = cols.ok
    if window_s <= 0:
        return Throughput(output_tok_s=0.0, input_tok_s=0.0, req_s=0.0)
    return Throughput(
        output_tok_s=float(cols.output_tokens[ok].sum()) / window_s,
        input_tok_s=float(cols.input_tokens[ok].sum()) / window_s,
        req_s=float(ok.sum()) / window_s,
    )
