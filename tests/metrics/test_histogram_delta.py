"""Server histograms over the measurement window: bucket deltas between scrapes and their quantiles, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infermeter.client.server_metrics import MetricsSeries
from infermeter.metrics.histogram_delta import bucket_quantile, histogram_delta

BOUNDS = [0.01, 0.05, 0.1, math.inf]


def test_quantiles_interpolate_inside_the_bucket_holding_the_rank() -> None:
    # window counts per bucket: 2 in (0, 10 ms], 4 in (10, 50], 2 in (50, 100], none above
    d = histogram_delta("h", BOUNDS, [1, 2, 2, 2], [3, 8, 10, 10], sum_delta=0.5)
    assert d is not None and d.count == 8
    assert d.mean_ms == pytest.approx(62.5)  # 0.5 s over 8 observations
    assert d.p50_ms == pytest.approx(30.0)  # rank 4: 10 ms + 40 ms x (4 - 2) / 4
    assert d.p95_ms == pytest.approx(90.0)  # rank 7.6: 50 ms + 50 ms x 1.6 / 2
    assert d.p99_ms == pytest.approx(98.0)  # rank 7.92: 50 ms + 50 ms x 1.92 / 2


def test_the_open_bucket_answers_with_the_highest_finite_bound_and_nothing_observed_is_none() -> None:
    assert bucket_quantile(0.99, np.array(BOUNDS), np.array([2.0, 6, 8, 18])) == pytest.approx(0.1)
    assert bucket_quantile(0.5, np.array(BOUNDS), np.array([0.0, 0, 0, 0])) is None
    assert histogram_delta("h", BOUNDS, [1, 2, 2, 2], [1, 2, 2, 2], 0.0) is None  # nothing in the window
    assert histogram_delta("h", BOUNDS, [5, 9, 9, 9], [1, 2, 2, 2], 0.0) is None  # a counter reset (restart)


def _exposition(counts: list[int], total: float) -> str:
    name = "vllm:request_queue_time_seconds"
    lines = [f"# HELP {name} q", f"# TYPE {name} histogram"]
    for le, c in zip(("0.01", "0.05", "0.1", "+Inf"), counts, strict=True):
        lines.append(f'{name}_bucket{{le="{le}",model_name="m"}} {c}')
    lines += [f'{name}_sum{{model_name="m"}} {total}', f'{name}_count{{model_name="m"}} {counts[-1]}']
    return "\n".join(lines) + "\n"


def test_the_scraper_takes_the_window_between_its_first_and_last_scrape() -> None:
    series = MetricsSeries()
    series.add(0.0, _exposition([1, 2, 2, 2], 0.03))
    series.add(1.0, _exposition([2, 5, 6, 6], 0.2))  # a scrape in the middle does not matter
    series.add(2.0, _exposition([3, 8, 10, 10], 0.53))
    summary = series.summary()
    q = summary.queue_time
    assert q is not None and q.metric == "vllm:request_queue_time_seconds" and q.count == 8
    assert (q.mean_ms, q.p50_ms, q.p95_ms) == pytest.approx((62.5, 30.0, 90.0))
    assert summary.prefill_time is None  # not exported: left out, not zero
