"""A metric over time: each series' groups in time order, each with its value and 95% CI (over runs and requests for a
group of two or more runs, catalog.evidence), and each change from one group to the next tested by the comparison
rules, Holm's correction across the changes of one series (one family: does this series change anywhere?).  A change
is marked when it is significant and at least the comparison's smallest effect of interest (MIN_EFFECT)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from infermeter.catalog.evidence import REPS, Change, Estimate, Samples, change, estimate, significant
from infermeter.catalog.groups import Point, Series
from infermeter.catalog.names import Metric
from infermeter.metrics.comparison import MIN_EFFECT
from infermeter.metrics.significance import holm


@dataclass
class TrendPoint:
    """One group on the trend: its estimate, and the change from the group before (None for the first), its
    Holm-adjusted p and whether it is marked."""

    point: Point
    estimate: Estimate
    change: Change | None = None
    p_adjusted: float | None = None
    marked: bool = False


@dataclass
class TrendSeries:
    name: str
    points: list[TrendPoint]


@dataclass
class Trend:
    """The metric's trend: its series, and what was left out (groups whose runs did not measure it)."""

    metric: Metric
    series: list[TrendSeries]
    notes: list[str] = field(default_factory=list)

    @property
    def marks(self) -> int:
        return sum(p.marked for s in self.series for p in s.points)


def _series(metric: Metric, series: Series, samples: Samples, reps: int, notes: list[str]) -> TrendSeries:
    points: list[TrendPoint] = []
    for point in series.points:
        found = estimate(metric, point, samples, reps)
        if found is None:
            notes.append(f"{point.label}: none of its runs measured {metric.name}; left out")
        else:
            points.append(TrendPoint(point, found))
    for before, after in itertools.pairwise(points):
        after.change = change(metric, before.point, after.point, before.estimate, after.estimate, samples, reps)
    tested = [p for p in points if p.change is not None]
    adjusted = holm([math.nan if p.change is None or p.change.p is None else p.change.p for p in tested])
    for p, q in zip(tested, adjusted, strict=True):
        assert p.change is not None
        p.p_adjusted = None if math.isnan(q) else q  # NaN: no test
        large = p.change.relative is not None and abs(p.change.relative) >= MIN_EFFECT
        p.marked = significant(p.change, p.p_adjusted) and large
    return TrendSeries(series.name, points)


def trend(metric: Metric, series: list[Series], samples: Samples, reps: int = REPS) -> Trend:
    """The metric's trend over each series."""
    notes: list[str] = []
    out = [_series(metric, s, samples, reps, notes) for s in series]
    return Trend(metric, [s for s in out if s.points], notes)
