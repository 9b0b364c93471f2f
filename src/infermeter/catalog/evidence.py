"""A group's value of a metric with its 95% CI, and the change between two groups with its CI and test, by the
comparison rules of `infermeter compare` (the IETF draft's section 6.3), with run-to-run variation in the intervals
wherever a group has two or more runs.

- A statistic of a per-request latency (`ttft.p99`, `tpot.mean`): its standard error from a hierarchical bootstrap
  (the group's runs drawn with replacement, then each drawn run's requests from its own), scaled by k/(k-1) for
  drawing from only k runs, with Student's t on the runs' degrees of freedom (Welch-Satterthwaite for a change): a
  run that sits apart widens the interval instead of passing for a change, and t says how little three runs tell
  about the spread between runs.  One run: the distribution-free percentile CI (Student's t for a mean) over its
  requests, and a bootstrap of its requests for a change: request-to-request variation only.
- `requests.success_rate`: the requests' outcomes pooled over the runs, Wilson's interval, Newcombe's for a change
  and Fisher's exact test, so one run a side is enough.
- A figure of the whole run (throughput): Student's t over the runs, Welch's test for a change (two runs a side).

A change's p goes into the caller's Holm family; `significant` is the trend's call on it."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infermeter.catalog.entry import CatalogRun
from infermeter.catalog.groups import Point
from infermeter.catalog.names import Metric
from infermeter.errors import UserError
from infermeter.metrics.comparison import ALPHA, runs_agree
from infermeter.metrics.significance import CHUNK_CELLS, mean_ci, welch_difference

REPS = 2000  # bootstrap replicates per group and metric, as `infermeter compare` draws by default
LEVEL = 0.95
ONE_RUN = "one run a side: Welch's test over runs needs two or more runs in each group"

# what an interval covers, as the reports name it
Over = Literal["runs and requests", "requests only", "pooled requests", "runs"]
EXPLAINED: dict[Over, str] = {
    "runs and requests": "a hierarchical bootstrap's standard error (the group's runs drawn with replacement, then "
    "each drawn run's requests) with Student's t on the runs' degrees of freedom: run-to-run and request-to-request "
    "variation",
    "requests only": "a group of one run: the interval covers request-to-request variation only, not run-to-run; "
    "repeat the runs (two or more a group) for one that does",
    "pooled requests": "the requests' outcomes pooled over the runs: Wilson's interval, Newcombe's for a change, "
    "Fisher's exact test",
    "runs": "Student's t over the runs' figures (Welch's for a change): none from one run",
}


@dataclass(frozen=True)
class Estimate:
    """A group's value of a metric, its 95% CI (None: none, `no_ci` says why) and what the CI covers, the value run
    by run, and how many requests (or runs, for a run's figure) it rests on."""

    value: float
    lo: float | None
    hi: float | None
    per_run: list[float]
    n: int
    over: Over
    no_ci: str | None = None


@dataclass(frozen=True)
class Change:
    """From one group to the next: the difference with its 95% CI, the same relative to the first group's value
    (None where that value is 0), the test's raw two-sided p (None: no test possible, `untestable` says why), its
    name, what the interval covers, and whether the runs agree (each of one group's beyond each of the other's)."""

    diff: float
    relative: float | None
    lo: float | None
    hi: float | None
    rel_lo: float | None
    rel_hi: float | None
    p: float | None
    test: str
    over: Over
    agree: bool | None
    untestable: str | None = None


def significant(change: Change, p_adjusted: float | None) -> bool:
    """The comparison rules' call on a tested change: it rejects after the correction, and no run disagrees."""
    return p_adjusted is not None and p_adjusted < ALPHA and change.agree is not False


def statistic(values: np.ndarray, q: float | None) -> float:
    """The quantile q of the values (linear interpolation, as the summary's), or their mean for None."""
    return float(np.quantile(values, q) if q is not None else values.mean())


def _row_statistic(values: np.ndarray, counts: np.ndarray | None, q: float | None) -> np.ndarray:
    """Each row's statistic over its valid values: all of them (`counts` None), else the row's `counts` values that
    are not NaN (rows padded with NaN where drawn runs are shorter than the longest)."""
    if counts is None:
        return np.quantile(values, q, axis=1) if q is not None else values.mean(axis=1)
    if q is None:
        return np.where(np.isnan(values), 0.0, values).sum(axis=1) / counts
    ordered = np.sort(values, axis=1)  # NaN last: each row's valid values first, in order
    h = (counts - 1) * q
    below = np.floor(h).astype(np.int64)
    above = np.minimum(below + 1, counts - 1)
    lo = np.take_along_axis(ordered, below[:, None], axis=1)[:, 0]
    hi = np.take_along_axis(ordered, above[:, None], axis=1)[:, 0]
    return lo + (h - below) * (hi - lo)


def hierarchical_replicates(
    runs: Sequence[np.ndarray], q: float | None, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """The group's statistic (quantile q, or the mean) in each of `reps` bootstrap replicates: as many runs as the
    group has, drawn with replacement, then each drawn run's requests drawn with replacement from its own, pooled.
    With one run this is the bootstrap of its requests.  Replicates are drawn in chunks of at most CHUNK_CELLS
    values (one replicate at a time where one alone holds more), so memory does not grow with the replicates."""
    arrays = [np.asarray(r, dtype=float) for r in runs]
    sizes = np.array([len(a) for a in arrays], dtype=np.int64)
    flat = np.concatenate(arrays)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    k, longest = len(arrays), int(sizes.max())
    ragged = bool((sizes != longest).any())
    out = np.empty(reps)
    step = max(1, CHUNK_CELLS // (k * longest))
    for first in range(0, reps, step):
        m = min(step, reps - first)
        drawn = rng.integers(0, k, size=(m, k))  # the runs of each replicate
        n = sizes[drawn][..., None]
        index = starts[drawn][..., None] + rng.integers(0, n, size=(m, k, longest))
        values = flat[index]
        counts = None
        if ragged:
            values = np.where(np.arange(longest) < n, values, np.nan)
            counts = n[..., 0].sum(axis=1)
        out[first : first + m] = _row_statistic(values.reshape(m, k * longest), counts, q)
    return out


@dataclass(frozen=True)
class Spread:
    """A group's statistic's variance from the hierarchical bootstrap, scaled by k/(k-1) for drawing from only its
    k runs (the plug-in variance of k values divides by k), and its runs k."""

    var: float
    runs: int

    @property
    def df(self) -> float:
        """Degrees of freedom of its spread: k - 1 over runs; one run's spread is its many requests' (infinite)."""
        return float(self.runs - 1) if self.runs >= 2 else np.inf


def critical(df: float) -> float:
    """The two-sided 95% critical value of Student's t on df degrees of freedom (the normal's for infinitely many)."""
    from scipy import stats as st

    upper = (1 + LEVEL) / 2
    return float(st.t.ppf(upper, df) if np.isfinite(df) else st.norm.ppf(upper))


class Samples:
    """Each run's per-request samples (ms), read from its records once, when a metric first needs them, and each
    group's bootstrap spread of a metric, drawn once (a seed of its own per group and metric, so two groups never
    share their draws)."""

    def __init__(self) -> None:
        self.cache: dict[str, dict[str, np.ndarray]] = {}
        self.spreads: dict[tuple[str, tuple[str, ...], int], Spread] = {}

    def of(self, run: CatalogRun) -> dict[str, np.ndarray]:
        """The run's samples by name (metrics.compared.Run.samples); damaged records are a one-line UserError."""
        if run.run_id not in self.cache:
            from infermeter.metrics import RecordColumns
            from infermeter.metrics.compared import Run

            try:
                cols = RecordColumns.of_run(run.path, run.info)
                self.cache[run.run_id] = Run.read(run.path, run.info, run.summary, cols).samples
            except UserError as exc:
                raise UserError(f"{run.path}: {exc}") from None
        return self.cache[run.run_id]

    def arrays(self, metric: Metric, point: Point) -> list[np.ndarray] | None:
        """The samples of the metric of the point's runs that have any (a run whose requests all failed has
        none), run by run; None for a figure of the whole run."""
        if metric.samples is None:
            return None
        return [a for a in (self.of(r)[metric.samples] for r in point.runs) if len(a)]

    def spread(self, metric: Metric, point: Point, reps: int) -> Spread:
        """The point's bootstrap spread of the metric over its runs with samples."""
        key = (metric.name, tuple(r.run_id for r in point.runs), reps)
        if key not in self.spreads:
            arrays = self.arrays(metric, point)
            assert arrays, "the spread of a point without samples"
            rng = np.random.default_rng(zlib.crc32("\0".join([metric.name, *key[1]]).encode()))
            boot = hierarchical_replicates(arrays, metric.quantile, reps, rng)
            k = len(arrays)
            self.spreads[key] = Spread(float(np.var(boot, ddof=1)) * (k / (k - 1) if k > 1 else 1.0), k)
        return self.spreads[key]


def _figures(metric: Metric, point: Point) -> list[float]:
    return [v for r in point.runs if (v := r.figure(metric.name)) is not None]


def _outcomes(point: Point) -> tuple[int, int, list[float]]:
    """The point's requests that succeeded and all its requests, pooled over its runs, and each run's rate."""
    counts = [(r.summary.requests.ok, r.summary.requests.total) for r in point.runs]
    return sum(c[0] for c in counts), sum(c[1] for c in counts), [ok / total for ok, total in counts if total]


def _wilson(ok: int, total: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(ok, total).proportion_ci(confidence_level=LEVEL, method="wilson")
    return float(ci.low), float(ci.high)


def estimate(metric: Metric, point: Point, samples: Samples, reps: int = REPS) -> Estimate | None:
    """The point's value of the metric with its 95% CI; None when none of its runs measured it.  A latency's value
    is over the pooled requests; its CI for two or more runs is Student's t on the runs' degrees of freedom with the
    hierarchical bootstrap's standard error, for one run the distribution-free CI of a percentile (summary.json's
    ci95) or Student's t of a mean."""
    if metric.outcomes:
        ok, total, per_run = _outcomes(point)
        if not total:
            return None
        lo, hi = _wilson(ok, total)
        return Estimate(ok / total, lo, hi, per_run, total, "pooled requests")
    arrays = samples.arrays(metric, point)
    if arrays is None:
        values = _figures(metric, point)
        if not values:
            return None
        m = mean_ci(values)
        assert m.mean is not None
        return Estimate(m.mean, m.lo, m.hi, values, m.n, "runs", "one run: no CI over runs" if m.n < 2 else None)
    if not arrays:
        return None
    q, pooled = metric.quantile, np.concatenate(arrays)
    per_run = [statistic(a, q) for a in arrays]
    value = statistic(pooled, q)
    if len(arrays) >= 2:
        sp = samples.spread(metric, point, reps)
        half = critical(sp.df) * float(np.sqrt(sp.var))
        return Estimate(value, value - half, value + half, per_run, len(pooled), "runs and requests")
    if q is not None and metric.stat is not None:
        from infermeter.metrics.statistics import stats

        st = stats(pooled)
        lo_, hi_ = getattr(st.ci95, metric.stat.replace(".", "_"))
        no_ci = None if lo_ is not None and hi_ is not None else f"too few requests for a CI of {metric.stat}"
        return Estimate(value, lo_, hi_, per_run, len(pooled), "requests only", no_ci)
    mc = mean_ci(pooled.tolist())
    assert mc.mean is not None
    return Estimate(mc.mean, mc.lo, mc.hi, per_run, mc.n, "requests only")


def _relative(lo: float | None, hi: float | None, base: float) -> tuple[float | None, float | None]:
    """A difference's interval relative to the value before (None where that value is 0 or a side is missing)."""
    if not base or lo is None or hi is None:
        return None, None
    return (lo / base, hi / base) if base > 0 else (hi / base, lo / base)


def _welch_df(a: Spread, b: Spread) -> float:
    """Welch-Satterthwaite degrees of freedom of the sum of two spreads (a one-run side adds none to the sum's
    uncertainty about itself: its variance is its requests')."""
    parts = [s.var**2 / s.df for s in (a, b) if np.isfinite(s.df)]
    below = sum(parts)
    return float((a.var + b.var) ** 2 / below) if below > 0 else np.inf


def _bootstrap_change(
    metric: Metric, a: Point, b: Point, ea: Estimate, eb: Estimate, samples: Samples, reps: int
) -> Change:
    """A latency's change: the difference of the pooled statistics, its standard error from both groups'
    hierarchical bootstrap spreads (independent draws), and Student's t on Welch-Satterthwaite degrees of freedom
    for its interval and its test (a p from the spread, not from counting replicates, so never floored at 1/reps,
    which Holm's correction would turn into "never significant")."""
    from scipy import stats as st

    sa, sb = samples.spread(metric, a, reps), samples.spread(metric, b, reps)
    df = _welch_df(sa, sb)
    se = float(np.sqrt(sa.var + sb.var))
    diff = eb.value - ea.value
    half = critical(df) * se
    if se > 0:
        p = float(2 * (st.t.sf(abs(diff) / se, df) if np.isfinite(df) else st.norm.sf(abs(diff) / se)))
    else:
        p = 1.0 if diff == 0 else 0.0
    rel_lo, rel_hi = _relative(diff - half, diff + half, ea.value)
    runs = min(sa.runs, sb.runs)
    name = "mean" if metric.quantile is None else (metric.stat or "").upper()
    test = f"hierarchical bootstrap of the {name} difference" if runs >= 2 else f"bootstrap of the {name} difference"
    over: Over = "runs and requests" if runs >= 2 else "requests only"
    relative = diff / ea.value if ea.value else None
    agree = runs_agree(ea.per_run, eb.per_run)
    return Change(diff, relative, diff - half, diff + half, rel_lo, rel_hi, p, test, over, agree)


def _outcome_change(a: Point, b: Point) -> Change:
    """The success rate's change over the pooled requests: Newcombe's hybrid score interval of the difference
    (from both groups' Wilson intervals) and Fisher's exact test of the 2x2 table of outcomes."""
    from scipy.stats import fisher_exact

    ok_a, n_a, per_a = _outcomes(a)
    ok_b, n_b, per_b = _outcomes(b)
    pa, pb = ok_a / n_a, ok_b / n_b
    (la, ua), (lb, ub) = _wilson(ok_a, n_a), _wilson(ok_b, n_b)
    diff = pb - pa
    lo = diff - float(np.hypot(pb - lb, ua - pa))
    hi = diff + float(np.hypot(ub - pb, pa - la))
    p = float(fisher_exact([[ok_a, n_a - ok_a], [ok_b, n_b - ok_b]]).pvalue)
    rel_lo, rel_hi = _relative(lo, hi, pa)
    test = "Fisher's exact test of the pooled requests' outcomes"
    return Change(
        diff, diff / pa if pa else None, lo, hi, rel_lo, rel_hi, p, test, "pooled requests", runs_agree(per_a, per_b)
    )


def change(
    metric: Metric, a: Point, b: Point, ea: Estimate, eb: Estimate, samples: Samples, reps: int = REPS
) -> Change:
    """The change of the metric from point `a` to point `b` (their estimates `ea`, `eb`), with its CI and test."""
    if metric.outcomes:
        return _outcome_change(a, b)
    if metric.samples is not None:
        return _bootstrap_change(metric, a, b, ea, eb, samples, reps)
    d = welch_difference(_figures(metric, a), _figures(metric, b))
    rel_lo, rel_hi = _relative(d.lo, d.hi, ea.value)
    return Change(
        d.diff,
        d.diff / ea.value if ea.value else None,
        d.lo,
        d.hi,
        rel_lo,
        rel_hi,
        d.p,
        "Welch's t over the runs",
        "runs",
        runs_agree(ea.per_run, eb.per_run),
        None if d.p is not None else ONE_RUN,
    )
