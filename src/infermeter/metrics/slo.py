"""SLOs a capacity search holds a run's summary against: percentile bounds, fluidity, goodput."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from infermeter.errors import UserError
from infermeter.metrics.fluidity import Deadlines, parse_deadlines
from infermeter.metrics.goodput import SLO_METRICS, parse_slo
from infermeter.metrics.summary_model import Summary
from infermeter.units import DURATION, MS_PER_S, duration_s

_BOUND = re.compile(rf"^(ttft|tpot|itl|e2e):(p50|p90|p95|p99|p99\.9|mean|max)\s*(<=|<)\s*{DURATION}$")


@dataclass(frozen=True)
class Slo:
    """One condition on a summary; `value` reads the number, `passes` compares it."""

    text: str
    kind: str  # "bound", "fluidity", "goodput"
    metric: str = ""
    stat: str = ""
    limit: float = 0.0  # ms for bounds; share or fraction otherwise
    deadlines: Deadlines | None = None
    goodput: dict[str, float] | None = None

    def value(self, summary: Summary) -> float | None:
        if self.kind == "bound":
            return summary.latency(self.metric).value(self.stat)
        if self.kind == "fluidity":
            return summary.fluidity.share_meeting_target if summary.fluidity is not None else None
        return summary.goodput.fraction

    def passes(self, summary: Summary) -> bool:
        v = self.value(summary)
        if v is None:
            return False
        return v <= self.limit if self.kind == "bound" else v >= self.limit

    def describe_value(self, summary: Summary) -> str:
        v = self.value(summary)
        if v is None:
            return "n/a"
        return f"{v:.1f} ms" if self.kind == "bound" else f"{100 * v:.1f}%"


def parse_capacity_slo(text: str) -> Slo:
    """`ttft:p99<=500ms`, `fluidity:tbt=25ms[,ttft=300ms][,target=0.9][,share=0.99]`,
    `goodput:ttft=200ms,tpot=50ms[,fraction=0.9]`."""
    t = text.strip()
    m = _BOUND.match(t)
    if m:
        metric, stat, _, num, unit = m.groups()
        limit = duration_s(num, unit) * MS_PER_S
        if not 0 < limit < math.inf:
            raise UserError(
                f"capacity SLO '{text}': the bound must be a positive, finite duration, e.g. ttft:p99<=500ms"
            )
        return Slo(t, "bound", metric, stat, limit)
    head, _, rest = t.partition(":")
    items = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
    if head == "fluidity":
        share = _share(items.pop("share", "0.99"), "share", text)
        spec = ",".join(f"{k}={v}" for k, v in items.items())
        return Slo(t, "fluidity", limit=share, deadlines=parse_deadlines(spec))
    if head == "goodput":
        fraction = _share(items.pop("fraction", "0.9"), "fraction", text)
        return Slo(t, "goodput", limit=fraction, goodput=parse_slo(",".join(f"{k}={v}" for k, v in items.items())))
    raise UserError(
        f"capacity SLO '{text}' is not understood: use METRIC:STAT<=VALUE (metrics {', '.join(SLO_METRICS)}; "
        "stats p50, p90, p95, p99, p99.9, mean, max), fluidity:tbt=25ms[,ttft=300ms,target=0.9,share=0.99], or "
        "goodput:ttft=200ms,tpot=50ms[,fraction=0.9]"
    )


def _share(value: str, key: str, text: str) -> float:
    """A share of requests in (0, 1]."""
    try:
        share = float(value)
    except ValueError:
        share = math.nan
    if not 0 < share <= 1:
        raise UserError(f"capacity SLO '{text}': {key} must be a number above 0 and at most 1, got {value}")
    return share
