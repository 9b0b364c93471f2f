"""One load level of a sweep or search, measured: offered and achieved load, latency percentiles, and the draft's
saturation evidence (5.2.3.1) and steady-state checks (5.2.3.2) from the run's records and the server's queue."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.metrics import latency
from infermeter.metrics.statistics import stats
from infermeter.metrics.steady_state import (
    OutputFlow,
    QueueTrend,
    SteadyWindow,
    completion_ratio,
    output_flow,
    queue_trend,
    steady_window,
)
from infermeter.metrics.summary_model import Stats
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suites.lab import Run
from infermeter.units import MS_PER_S

TAIL_FACTOR = 10.0  # 5.2.3.1: P99 latency above 10x the P50 at lower load
COMPLETION_FLOOR = 0.9  # 5.2.3.1: completion rate below 90% of the arrival rate


@dataclass
class Level:
    offered: float  # req/s (open loop) or concurrency (closed loop)
    run: Run
    queue: QueueTrend
    completion: float | None
    server_growing: bool | None  # the server's waiting gauge, when it exports one
    steady: SteadyWindow
    flow: OutputFlow | None = None  # output tokens offered and delivered per second (None: under 3 requests sent)

    def steady_latency(self, metric: str) -> Stats:
        """TTFT, TPOT or E2E over the requests sent in the steady window (the draft's Table 4 at this level)."""
        values = getattr(latency, metric)(self.run.columns())
        return stats(np.where(self.steady.sent, values, np.nan), MS_PER_S)

    @property
    def output_tok_s(self) -> float:
        """Achieved output throughput: tokens delivered per second of the steady window."""
        return self.steady.output_tok_s

    @property
    def growing(self) -> bool:
        return self.queue.growing if self.server_growing is None else self.server_growing or self.queue.growing

    def saturation(self, baseline_p50_ms: float | None) -> list[str]:
        """Which of the draft's three saturation criteria this level meets (empty: not saturated)."""
        why = []
        if self.growing:
            why.append(f"queue grows ({self.queue.start_level:.0f} -> {self.queue.end_level:.0f} in flight)")
        if self.completion is not None and self.completion < COMPLETION_FLOOR:
            why.append(f"completions {fmt_pct(self.completion)} of arrivals")
        p99 = self.run.summary.e2e_ms.p99
        if baseline_p50_ms and p99 is not None and p99 > TAIL_FACTOR * baseline_p50_ms:
            why.append(f"E2E P99 {fmt_ms(p99)} > 10x the P50 at lower load ({fmt_ms(baseline_p50_ms)})")
        if (self.run.summary.requests.success_rate or 0.0) < COMPLETION_FLOOR:
            why.append(f"only {fmt_pct(self.run.summary.requests.success_rate)} of requests succeeded")
        return why


def measure(offered: float, run: Run) -> Level:
    """The level's saturation evidence over the sending window, the first 10% excluded (5.2.3.2)."""
    cols = run.columns()
    sub = cols.submitted_at
    finished = np.where(cols.ok, cols.tokens.last(), np.inf)
    finished = np.where(np.isnan(finished), np.inf, finished)
    window = (float(sub.min()), float(sub.max())) if len(sub) else (0.0, 0.0)
    server = run.summary.server_metrics
    growing = getattr(server, "waiting_growing", None) if server is not None else None
    trend = queue_trend(sub, finished, window)
    asked = np.where(cols.ok, cols.output_tokens, np.maximum(cols.max_tokens, cols.output_tokens))
    flow = output_flow(sub, asked, finished, np.where(cols.ok, cols.output_tokens, 0))
    return Level(offered, run, trend, completion_ratio(sub, finished), growing, steady_window(cols), flow)
