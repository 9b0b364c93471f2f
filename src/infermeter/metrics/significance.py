"""Statistics for holding two groups of runs against each other (the IETF draft's section 6.3: confidence
intervals, at least three runs, an appropriate test): Mann-Whitney U with Cliff's delta, a bootstrap of a
percentile's difference stratified by run, Holm's correction, Student-t intervals and Welch's test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats as st

CHUNK_CELLS = 4_000_000  # the bootstrap's largest temporary array, in elements


@dataclass(frozen=True)
class MannWhitney:
    u: float  # U of the second group: pairs with b > a, plus half the ties
    p: float
    cliffs_delta: float  # P(b > a) - P(b < a): positive when b tends to be larger


def mann_whitney(a: np.ndarray, b: np.ndarray) -> MannWhitney:
    """Two-sided Mann-Whitney U test and Cliff's delta (= 2U/(n_a n_b) - 1); NaN when a side is empty."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(a) or not len(b):
        return MannWhitney(float("nan"), float("nan"), float("nan"))
    ties = len(np.unique(np.concatenate([a, b]))) < len(a) + len(b)
    method = "asymptotic" if ties or max(len(a), len(b)) > 500 else "auto"
    res = st.mannwhitneyu(b, a, alternative="two-sided", use_continuity=True, method=method)
    u = float(res.statistic)
    return MannWhitney(u, float(res.pvalue), 2 * u / (len(a) * len(b)) - 1)


def effect_magnitude(delta: float) -> str:
    """Cliff's delta in words, by Romano et al. (2006): negligible < 0.147 <= small < 0.33 <= medium < 0.474."""
    if not np.isfinite(delta):
        return "n/a"
    d = abs(delta)
    return "negligible" if d < 0.147 else "small" if d < 0.33 else "medium" if d < 0.474 else "large"


@dataclass(frozen=True)
class QuantileDifference:
    diff: float  # quantile of b - quantile of a (pooled runs)
    lo: float
    hi: float
    p: float  # two-sided p of "no difference": the difference over its bootstrap standard error (a Wald test)


def _replicates(runs: Sequence[np.ndarray], q: float, reps: int, rng: np.random.Generator) -> np.ndarray:
    """The group's quantile in each bootstrap replicate: every run resampled within itself, then pooled."""
    runs = [np.asarray(r, dtype=float) for r in runs if len(r)]
    total = sum(len(r) for r in runs)
    out = np.empty(reps)
    step = max(1, CHUNK_CELLS // max(total, 1))
    for start in range(0, reps, step):
        k = min(step, reps - start)
        pooled = np.concatenate([r[rng.integers(0, len(r), size=(k, len(r)))] for r in runs], axis=1)
        out[start : start + k] = np.quantile(pooled, q, axis=1)
    return out


def bootstrap_quantile_difference(
    a_runs: Sequence[np.ndarray],
    b_runs: Sequence[np.ndarray],
    q: float,
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> QuantileDifference:
    """The difference of a quantile between two groups of runs with its percentile-bootstrap CI; requests are
    resampled within each run (stratified), so each run keeps its weight.  The p-value divides the difference by
    the replicates' standard deviation (a Wald test): unlike counting replicates across zero, it is not floored at
    1/reps, which a multiple-comparison correction over many tests would turn into "never significant".
    Deterministic for a seed."""
    a_all = np.concatenate([np.asarray(r, dtype=float) for r in a_runs]) if a_runs else np.empty(0)
    b_all = np.concatenate([np.asarray(r, dtype=float) for r in b_runs]) if b_runs else np.empty(0)
    if not len(a_all) or not len(b_all):
        nan = float("nan")
        return QuantileDifference(nan, nan, nan, nan)
    rng = np.random.default_rng(seed)
    d = _replicates(b_runs, q, reps, rng) - _replicates(a_runs, q, reps, rng)
    tail = (1 - level) / 2
    lo, hi = np.quantile(d, [tail, 1 - tail])
    diff = float(np.quantile(b_all, q) - np.quantile(a_all, q))
    se = float(np.std(d, ddof=1))
    p = float(2 * st.norm.sf(abs(diff) / se)) if se > 0 else (1.0 if diff == 0 else 0.0)
    return QuantileDifference(diff, float(lo), float(hi), p)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, at most 1); NaN entries stay NaN and are not
    counted as tests."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    order = idx[np.argsort(p[idx], kind="stable")]
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


@dataclass(frozen=True)
class MeanCI:
    n: int
    mean: float | None
    lo: float | None
    hi: float | None


def mean_ci(values: Sequence[float], level: float = 0.95) -> MeanCI:
    """The mean of repeated runs' figures and its Student-t confidence interval (none from a single run)."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    n = len(x)
    if n == 0:
        return MeanCI(0, None, None, None)
    mean = float(x.mean())
    if n == 1:
        return MeanCI(1, mean, None, None)
    half = float(st.t.ppf(0.5 + level / 2, n - 1) * x.std(ddof=1) / np.sqrt(n))
    return MeanCI(n, mean, mean - half, mean + half)


def welch_p(a: Sequence[float] | npt.NDArray[np.float64], b: Sequence[float] | npt.NDArray[np.float64]) -> float | None:
    """Two-sided Welch t-test p-value over runs' figures; None below two values a side."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return None
    if x.std() == 0 and y.std() == 0:
        return 1.0 if x.mean() == y.mean() else 0.0
    return float(st.ttest_ind(x, y, equal_var=False).pvalue)


@dataclass(frozen=True)
class Difference:
    diff: float  # mean of b - mean of a
    lo: float | None  # its 95% CI (Welch-Satterthwaite t); None below two values a side
    hi: float | None
    p: float | None  # two-sided Welch t-test; None below two values a side


def welch_difference(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Difference:
    """The difference of two groups' means over repeated runs with its Welch confidence interval and test (no equal
    variances assumed: two systems' run-to-run spreads seldom match).  A side without values has no mean: the
    difference is NaN, without the warning numpy gives for the mean of nothing."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(x) or not len(y):
        return Difference(float("nan"), None, None, None)
    diff = float(y.mean() - x.mean())
    if len(x) < 2 or len(y) < 2:
        return Difference(diff, None, None, None)
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = float(np.sqrt(va + vb))
    if se == 0:
        return Difference(diff, diff, diff, welch_p(x, y))
    df = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    half = float(st.t.ppf(0.5 + level / 2, df) * se)
    return Difference(diff, diff - half, diff + half, welch_p(x, y))
