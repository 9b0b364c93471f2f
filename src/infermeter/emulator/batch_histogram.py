"""A Prometheus histogram for values observed per stream or per token, counted in batches (emulator/metrics.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
from prometheus_client import Metric
from prometheus_client.core import HistogramMetricFamily

LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
TOKEN_BUCKETS = tuple(float(2**k) for k in range(18))  # 1 .. 131072 tokens


class BatchHistogram:
    """A Prometheus histogram exported under the same name and buckets as prometheus_client's, for values observed
    per stream or per token: they are kept as they come and counted in one numpy pass per FOLD_AT of them or when
    scraped (no lock, no Python call per token; prometheus_client's observe took a lock and a bucket search each)."""

    FOLD_AT = 8192

    def __init__(self, name: str, doc: str, model: str, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.name, self.doc, self.model, self.buckets = name, doc, model, buckets
        self.bounds = np.asarray(buckets)
        self.counts = np.zeros(len(buckets) + 1, dtype=np.int64)
        self.sum = 0.0
        self._pending: list[float] = []

    def observe(self, value: float) -> None:
        self._pending.append(value)
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def observe_gaps(self, times: list[float]) -> None:
        """Observe the gaps between consecutive `times`."""
        self._pending += [b - a for a, b in itertools.pairwise(times)]
        if len(self._pending) >= self.FOLD_AT:
            self._fold()

    def _fold(self) -> None:
        values = np.asarray(self._pending)
        self._pending = []
        self.counts += np.bincount(np.searchsorted(self.bounds, values), minlength=len(self.counts))
        self.sum += float(values.sum())

    def snapshot(self) -> tuple[list[tuple[str, int]], float]:
        """Every value observed so far: the cumulative count per bucket (its `le` label, +Inf last) and the sum."""
        self._fold()
        cumulative = np.cumsum(self.counts).tolist()
        buckets = [(f"{b}", c) for b, c in zip(self.buckets, cumulative, strict=False)]
        return [*buckets, ("+Inf", cumulative[-1])], self.sum

    def collect(self) -> Iterator[Metric]:
        buckets, total = self.snapshot()
        h = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        h.add_metric([self.model], buckets, sum_value=total)
        yield h
