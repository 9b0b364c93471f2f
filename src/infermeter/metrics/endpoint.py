"""Metrics of APIs that answer each request with one body instead of a token stream (embeddings, rerank): latency,
inputs per request and per second, input tokens per second; the `endpoint` block of summary.json."""

from __future__ import annotations

import numpy as np

from infermeter.metrics.columns import RecordColumns
from infermeter.metrics.statistics import stats
from infermeter.metrics.summary_model import Endpoint
from infermeter.units import MS_PER_S


def endpoint_block(cols: RecordColumns, e2e: np.ndarray, window_s: float) -> Endpoint | None:
    """The ok requests that carried a list of inputs, over the measurement window (`e2e`: each request's latency in
    seconds, latency.e2e); None when no ok request carried one (every generating API)."""
    inputs = cols.one_body("inputs")
    carried = cols.ok & ~np.isnan(inputs)
    if not carried.any():
        return None

    def per_second(total: float) -> float:
        return total / window_s if window_s > 0 else 0.0

    return Endpoint(
        inputs=stats(np.where(carried, inputs, np.nan)),
        inputs_s=per_second(float(inputs[carried].sum())),
        input_tok_s=per_second(float(cols.input_tokens[carried].sum())),
        latency_ms=stats(np.where(carried, e2e, np.nan), MS_PER_S),
    )
