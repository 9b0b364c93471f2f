"""The regression check for CI: in each series, the newest group of runs (the candidate) against a baseline (the
group before it, or the runs of a baseline directory), metric by metric.  A metric regressed when the whole 95% CI of
its change in the worse direction (metrics.headline's `better`), relative to the baseline, lies beyond the allowed
share and its test rejects after Holm's correction across the metrics of one candidate (catalog.evidence: with two or
more runs a side both include run-to-run variation).  A metric the baseline measured and the candidate did not (none
of its requests gave a value) regressed too.  An improvement is the same in the better direction; a significant
change not wholly beyond the share is within tolerance.  The gate fails closed: nothing verified fails it."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from infermeter.catalog.entry import CatalogRun
from infermeter.catalog.evidence import EXPLAINED, REPS, Change, Estimate, Samples, change, estimate
from infermeter.catalog.groups import Point, Series
from infermeter.catalog.names import SUCCESS_RATE, Metric
from infermeter.metrics.comparison import ALPHA
from infermeter.metrics.significance import holm

Verdict = Literal["regression", "improvement", "within tolerance", "no significant change", "not verifiable"]
VERDICTS: tuple[Verdict, ...] = (
    "regression",
    "improvement",
    "within tolerance",
    "no significant change",
    "not verifiable",
)
# what `runs check` holds when no --metric is given: the latencies users feel, the throughput they pay for, and
# whether the requests succeeded at all (a candidate whose requests fail has no latency left to hold)
DEFAULT_METRICS = ("ttft.p50", "ttft.p99", "tpot.p50", "tpot.p99", "e2e.p99", "throughput.output_tok_s", SUCCESS_RATE)
UNMEASURED = "the baseline measured it, the candidate did not (none of its requests gave a value)"


@dataclass(frozen=True)
class Pair:
    """A series' candidate group and the baseline it is held against."""

    series: str
    baseline: Point
    candidate: Point


@dataclass
class CheckRow:
    """One metric of one pair: both groups' estimates, the change, its Holm-adjusted p, the verdict and why."""

    pair: Pair
    metric: Metric
    baseline: Estimate | None
    candidate: Estimate | None
    change: Change | None
    p_adjusted: float | None
    verdict: Verdict
    why: str


@dataclass
class Check:
    """Every pair's rows, the share of change allowed, and notes (what could not be checked, what the intervals
    cover where that is less than run-to-run variation)."""

    rows: list[CheckRow]
    max_regression: float
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[CheckRow]:
        return [r for r in self.rows if r.verdict == "regression"]

    @property
    def verified(self) -> list[CheckRow]:
        """The rows with a verdict other than "not verifiable"."""
        return [r for r in self.rows if r.verdict != "not verifiable"]

    @property
    def failed(self) -> bool:
        """Whether the gate fails: on a regression, and closed, when no check at all could be verified."""
        return bool(self.regressions) or not self.verified


def last_pairs(series: list[Series]) -> tuple[list[Pair], list[str]]:
    """Each series' newest group against the group before it; a series of one group has nothing to be held
    against (a note)."""
    pairs, notes = [], []
    for s in series:
        if len(s.points) < 2:
            notes.append(f"{s.name or 'the runs'}: one group ({s.points[0].label}), no earlier one to hold it against")
        else:
            pairs.append(Pair(s.name, s.points[-2], s.points[-1]))
    return pairs, notes


def pairs_against(
    series: list[Series], is_baseline: Callable[[CatalogRun], bool], label: str
) -> tuple[list[Pair], list[str]]:
    """Each series' newest group of runs that are not the baseline's, against the baseline's runs of the series as
    one group (`label`)."""
    pairs, notes = [], []
    for s in series:
        base = [r for p in s.points for r in p.runs if is_baseline(r)]
        others = [Point(p.label, [r for r in p.runs if not is_baseline(r)]) for p in s.points]
        others = [p for p in others if p.runs]
        name = s.name or "the runs"
        if not others:
            notes.append(f"{name}: only the baseline's runs, no candidate")
        elif not base:
            notes.append(f"{name}: the baseline has no run of this series")
        else:
            pairs.append(Pair(s.name, Point(label, base), others[-1]))
    return pairs, notes


def _bounds(metric: Metric, ch: Change) -> tuple[float, float] | None:
    """The lower ends of the change's 95% CI in the worse and in the better direction, relative to the baseline;
    from a baseline of 0 (no relative change) the difference's own, which the verdict holds against 0.  None
    without an interval."""
    lo, hi = (ch.rel_lo, ch.rel_hi) if ch.relative is not None else (ch.lo, ch.hi)
    if lo is None or hi is None:
        return None
    return (lo, -hi) if metric.better == "lower" else (-hi, lo)


def shown(ch: Change) -> str:
    """The change relative to the baseline with its CI (`+10.2% [+6.1%, +14.5%]`), or the difference from a
    baseline of 0 with its CI."""
    if ch.relative is None:
        ci = f" [{ch.lo:+.4g}, {ch.hi:+.4g}]" if ch.lo is not None and ch.hi is not None else ""
        return f"{ch.diff:+.4g} from 0{ci}"
    ci = f" [{ch.rel_lo:+.1%}, {ch.rel_hi:+.1%}]" if ch.rel_lo is not None and ch.rel_hi is not None else ""
    return f"{ch.relative:+.1%}{ci}"


def judge(metric: Metric, ch: Change, p_adjusted: float | None, max_regression: float) -> tuple[Verdict, str]:
    """The verdict on one change and the reason: its test after Holm's correction, then its 95% CI against the
    allowance in each direction."""
    if metric.better == "neither":
        return "not verifiable", f"neither direction of {metric.name} is better"
    bounds = _bounds(metric, ch)
    if ch.p is None or p_adjusted is None or bounds is None:
        return "not verifiable", ch.untestable or "no interval for the change"
    allowed = f"{max_regression:.1%}"
    tested = f"{ch.test}, Holm-adjusted p = {p_adjusted:.3g}"
    if p_adjusted >= ALPHA:
        return "no significant change", f"{shown(ch)}: {tested}"
    worse, better = bounds
    limit = max_regression if ch.relative is not None else 0.0  # from 0, any change is beyond every share
    if worse > limit:
        return "regression", f"{shown(ch)}: worse by more than {allowed} with 95% confidence ({tested})"
    if better > limit:
        return "improvement", f"{shown(ch)}: better by more than {allowed} with 95% confidence ({tested})"
    return "within tolerance", f"{shown(ch)}: significant ({tested}), but its CI reaches within {allowed}"


def _unmeasured(metric: Metric, eb: Estimate | None, ec: Estimate | None) -> tuple[Verdict, str]:
    """The verdict where a group did not measure the metric: a regression when only the candidate did not (its
    requests all failed, or it no longer reports the figure), else nothing to hold the candidate against."""
    if metric.better == "neither":
        return "not verifiable", f"neither direction of {metric.name} is better"
    if eb is not None:
        return "regression", UNMEASURED
    return "not verifiable", "the baseline did not measure it" if ec is not None else "neither group measured it"


def _rows(pair: Pair, metrics: list[Metric], max_regression: float, samples: Samples, reps: int) -> list[CheckRow]:
    rows = []
    for metric in metrics:
        eb = estimate(metric, pair.baseline, samples, reps)
        ec = estimate(metric, pair.candidate, samples, reps)
        if eb is None or ec is None:
            rows.append(CheckRow(pair, metric, eb, ec, None, None, *_unmeasured(metric, eb, ec)))
            continue
        ch = change(metric, pair.baseline, pair.candidate, eb, ec, samples, reps)
        rows.append(CheckRow(pair, metric, eb, ec, ch, None, "not verifiable", ""))
    tested = [r for r in rows if r.change is not None]
    adjusted = holm([math.nan if r.change is None or r.change.p is None else r.change.p for r in tested])
    for row, q in zip(tested, adjusted, strict=True):
        assert row.change is not None
        row.p_adjusted = None if math.isnan(q) else q
        row.verdict, row.why = judge(row.metric, row.change, row.p_adjusted, max_regression)
    return rows


def _narrow(pair: Pair, rows: list[CheckRow]) -> list[str]:
    """A note naming the metrics whose intervals cover request-to-request variation only (one run a side)."""
    names = [r.metric.name for r in rows if r.change is not None and r.change.over == "requests only"]
    if not names:
        return []
    return [f"{pair.series + ': ' if pair.series else ''}{', '.join(names)}: {EXPLAINED['requests only']}"]


def check(pairs: list[Pair], metrics: list[Metric], max_regression: float, samples: Samples, reps: int = REPS) -> Check:
    """Each pair's candidate against its baseline on every metric."""
    result = Check([], max_regression)
    for pair in pairs:
        rows = _rows(pair, metrics, max_regression, samples, reps)
        result.rows += rows
        result.notes += _narrow(pair, rows)
    return result
