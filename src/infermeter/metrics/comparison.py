"""Comparing systems (the IETF draft's section 6): runs grouped by configuration, the 6.1 equivalence checks, each
group's mean and 95% CI over its repeated runs (6.3), and per-metric significance on the per-request samples with
Holm's correction across the tests of one comparison: one family per table of differences.  Suites compared level
by level make one comparison (one family) per level, and their suite figures another (metrics.suite_comparison):
each level answers its own question (do the systems differ at this load?), and the answer must be the one the same
runs compared alone would get; correcting across every level would make a level's verdict depend on how many
levels the test happens to plan.  The price, stated in the report: over N levels the chance of at least one false
call somewhere is up to N x 5%, each level's own at most 5%.

A difference is called significant only when three things hold: the per-request test rejects after the correction
(Mann-Whitney U for the distribution, a bootstrap stratified by run for P50 and P99), the difference is at least the
smallest effect of interest (a relative change for P50/P99, Cliff's delta for the distribution), and it holds run by
run (each of B's runs lies beyond each of A's).  Per-request samples of one run are not independent of each other;
the last two conditions keep a host's slow minute in one run from reading as a difference between systems."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from infermeter.metrics.checklist import Finding, PlanMatch, checklist, equivalence
from infermeter.metrics.compared import Group
from infermeter.metrics.significance import (
    bootstrap_quantile_difference,
    effect_magnitude,
    holm,
    mann_whitney,
    mean_ci,
    welch_difference,
)

ALPHA = 0.05
MIN_EFFECT = 0.05  # the smallest relative change of a percentile worth calling a difference
MIN_DELTA = 0.147  # Cliff's delta below this is negligible (Romano et al., 2006)
MIN_RUNS = 3  # the draft's 6.3: at least three independent runs
METRICS = {  # name -> label with unit; "itl" is named by the runs' ITL option where shown (report.comparison)
    "ttft": "TTFT (ms)",
    "itl": "ITL (ms)",
    "tpot": "TPOT (ms)",
    "e2e": "E2E (ms)",
    "normalized": "normalized latency (ms/token)",
}
RUN_FIGURES = {"output_tok_s": "output throughput (tok/s)", "req_s": "request throughput (req/s)"}


@dataclass
class Row:
    """One compared statistic of one metric: the baseline's and the other group's value, the difference with its
    95% CI, the test's raw and Holm-adjusted p, the effect size, whether each run agrees, and the verdict."""

    group: str
    metric: str
    statistic: str  # "P50", "P99", "distribution", "mean over runs"
    a: float | None
    b: float | None
    diff: float | None
    lo: float | None
    hi: float | None
    p: float
    effect: str
    large_enough: bool
    runs_agree: bool | None  # None when a group has a single run
    p_adjusted: float = float("nan")
    significant: bool = False

    @property
    def relative(self) -> float | None:
        return self.diff / self.a if self.diff is not None and self.a else None


def runs_agree(a: list[float], b: list[float]) -> bool | None:
    """Each of B's runs (or repeats) lies beyond each of A's, in one direction (None when a side has one)."""
    if len(a) < 2 or len(b) < 2:
        return None
    return min(b) > max(a) or max(b) < min(a)


def _quantile_row(group: str, metric: str, q: float, base: Group, other: Group, reps: int) -> Row:
    a_runs = [r.samples[metric] for r in base.runs]
    b_runs = [r.samples[metric] for r in other.runs]
    qd = bootstrap_quantile_difference(a_runs, b_runs, q, reps=reps)
    a = float(np.quantile(base.pooled(metric), q)) if len(base.pooled(metric)) else None
    b = float(np.quantile(other.pooled(metric), q)) if len(other.pooled(metric)) else None
    per_run = [[float(np.quantile(s, q)) for s in runs if len(s)] for runs in (a_runs, b_runs)]
    rel = qd.diff / a if a else 0.0
    finite = np.isfinite(qd.diff)
    return Row(
        group,
        metric,
        f"P{q * 100:g}",
        a,
        b,
        float(qd.diff) if finite else None,
        float(qd.lo) if finite else None,
        float(qd.hi) if finite else None,
        float(qd.p),
        f"{rel:+.1%}" if a else "n/a",
        bool(finite and abs(rel) >= MIN_EFFECT),
        runs_agree(*per_run),
    )


def _distribution_row(group: str, metric: str, base: Group, other: Group) -> Row:
    a, b = base.pooled(metric), other.pooled(metric)
    mw = mann_whitney(a, b)
    per_run = [[float(np.median(r.samples[metric])) for r in g.runs if len(r.samples[metric])] for g in (base, other)]
    med_a = float(np.median(a)) if len(a) else None
    med_b = float(np.median(b)) if len(b) else None
    diff = med_b - med_a if med_a is not None and med_b is not None else None
    delta = mw.cliffs_delta
    return Row(
        group,
        metric,
        "median (Mann-Whitney U)",
        med_a,
        med_b,
        diff,
        None,
        None,
        float(mw.p),
        f"Cliff's delta {delta:+.3f} ({effect_magnitude(delta)})" if np.isfinite(delta) else "n/a",
        bool(np.isfinite(delta) and abs(delta) >= MIN_DELTA),
        runs_agree(*per_run),
    )


def _figure_row(group: str, name: str, base: Group, other: Group) -> Row:
    """A throughput figure, one value a run: the difference of the means with its Welch CI and test (the suite
    figures' statistics, metrics.suite_comparison)."""
    a_vals = [r.figure(name) for r in base.runs]
    b_vals = [r.figure(name) for r in other.runs]
    ma, mb = mean_ci(a_vals), mean_ci(b_vals)
    d = welch_difference(a_vals, b_vals)
    finite = bool(np.isfinite(d.diff))
    rel = d.diff / ma.mean if finite and ma.mean else 0.0
    return Row(
        group,
        name,
        "mean over runs (Welch t)",
        ma.mean,
        mb.mean,
        d.diff if finite else None,
        d.lo,
        d.hi,
        float("nan") if d.p is None else d.p,
        f"{rel:+.1%}" if ma.mean else "n/a",
        abs(rel) >= MIN_EFFECT,
        runs_agree(a_vals, b_vals),
    )


@dataclass
class Comparison:
    """Everything `infermeter compare` reports."""

    groups: list[Group]
    baseline: Group
    equivalence: list[Finding]
    checklist: list[Finding]
    rows: list[Row]
    limitations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the reader needs beside the tables (a suite level's runs)

    @property
    def equivalent(self) -> bool:
        return all(f.met for f in self.equivalence if f.must)

    @property
    def itl_options(self) -> list[str]:
        """The runs' ITL options (the IETF draft, 4.6.3: option A's figure is the Time Between Chunks)."""
        return sorted({r.summary.itl_option for g in self.groups for r in g.runs})


def compare(groups: list[Group], baseline: Group, reps: int = 2000, plan: PlanMatch | None = None) -> Comparison:
    """Each group against the baseline, the p-values of this comparison corrected together (Holm: one family),
    each row judged; `plan`: the runs are one level of suites compared, their 6.1 load judged on the plan."""
    rows: list[Row] = []
    for other in groups:
        if other is baseline:
            continue
        for metric in METRICS:
            if not len(baseline.pooled(metric)) or not len(other.pooled(metric)):
                continue
            rows.append(_distribution_row(other.label, metric, baseline, other))
            rows += [_quantile_row(other.label, metric, q, baseline, other, reps) for q in (0.5, 0.99)]
        rows += [_figure_row(other.label, name, baseline, other) for name in RUN_FIGURES]
    for row, adjusted in zip(rows, holm([r.p for r in rows]), strict=True):
        row.p_adjusted = adjusted
        row.significant = bool(adjusted < ALPHA and row.large_enough and row.runs_agree is not False)
    limitations = [
        f"{g.label} has {len(g.runs)} run{'s' if len(g.runs) != 1 else ''}: the draft's 6.3 asks for at least "
        f"{MIN_RUNS} independent runs per system"
        for g in groups
        if len(g.runs) < MIN_RUNS
    ]
    if any(len(g.runs) < 2 for g in groups):
        limitations.append(
            "with a single run, a difference cannot be checked run by run: significance rests on "
            "the per-request samples of one run alone"
        )
    return Comparison(groups, baseline, equivalence(groups, plan), checklist(groups), rows, limitations)
