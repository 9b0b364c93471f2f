"""A Prometheus histogram over a window: the increase of its cumulative bucket counts between two scrapes, and
quantiles read from it by linear interpolation inside a bucket, as Prometheus' histogram_quantile does."""

from __future__ import annotations

import math

import numpy as np

from infermeter.metrics.summary_model import HistogramDelta
from infermeter.units import MS_PER_S

QUANTILES = {"p50_ms": 0.50, "p95_ms": 0.95, "p99_ms": 0.99}


def bucket_quantile(q: float, bounds: np.ndarray, cumulative: np.ndarray) -> float | None:
    """The q-quantile of observations counted in cumulative buckets with upper bounds `bounds` (ascending, +Inf
    last): linear inside the bucket that holds the rank, from 0 for the first; the +Inf bucket answers with the
    highest finite bound."""
    total = float(cumulative[-1])
    if total <= 0:
        return None
    rank = q * total
    i = int(np.searchsorted(cumulative, rank, side="left"))
    i = min(i, len(bounds) - 1)
    if math.isinf(bounds[i]):
        return float(bounds[i - 1]) if i > 0 else None
    lower = float(bounds[i - 1]) if i > 0 else 0.0
    below = float(cumulative[i - 1]) if i > 0 else 0.0
    inside = float(cumulative[i]) - below
    if inside <= 0:
        return float(bounds[i])
    return lower + (float(bounds[i]) - lower) * (rank - below) / inside


def histogram_delta(
    metric: str,
    bounds: list[float],
    first: list[float],
    last: list[float],
    sum_delta: float,
) -> HistogramDelta | None:
    """count, mean and P50/P95/P99 in ms of what a seconds histogram observed between two scrapes; None when it
    observed nothing (or a counter reset made the window's counts meaningless)."""
    order = np.argsort(bounds)
    b = np.asarray(bounds, dtype=float)[order]
    window = np.asarray(last, dtype=float)[order] - np.asarray(first, dtype=float)[order]
    if len(b) == 0 or np.any(window < 0) or window[-1] <= 0:
        return None
    count = round(float(window[-1]))
    values = {name: bucket_quantile(q, b, window) for name, q in QUANTILES.items()}
    return HistogramDelta(
        metric=metric,
        count=count,
        mean_ms=sum_delta / window[-1] * MS_PER_S,
        **{k: (v * MS_PER_S if v is not None else None) for k, v in values.items()},
    )
