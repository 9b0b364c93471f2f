"""Summary statistics with distribution-free confidence intervals for percentiles, and sample-count warnings.

Percentiles use linear interpolation between order statistics (numpy's default, as vLLM's benchmark does).
The 95% interval of a percentile q is [x_(l), x_(u)], the order statistics whose ranks l and u bracket the
binomial(n, q) count of samples below the true quantile with at least 95% probability; a side that would need
a rank outside 1..n is reported as null (too few samples for that bound).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from infermeter.metrics.summary_model import Ci95, Stats

PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
# draft 5.1.4.3: samples needed for 10% relative error at 95% confidence
MIN_SAMPLES = {99.0: 1000, 99.9: 10000}


def pkey(p: float) -> str:
    """The summary key of a percentile: 50 -> "p50", 99.9 -> "p99.9"."""
    return f"p{p:g}"


def binom_ppf(a: float, n: int, p: float) -> int:
    """Smallest k with P(Binomial(n, p) <= k) >= a.

    The Cornish-Fisher estimate lands within a few counts of the answer, so the exact CDF is searched in a
    small window around it; the full 12-sigma range is the fallback when the window does not bracket it.
    """
    mean, sd = n * p, float(np.sqrt(n * p * (1 - p)))
    z = float(special.ndtri(a))
    guess = mean + z * sd + (z * z - 1) * (1 - 2 * p) / 6
    half = 8 + int(0.01 * sd)
    for lo, hi in ((int(guess) - half, int(guess) + half), (int(mean - 12 * sd) - 2, int(mean + 12 * sd) + 2)):
        k = np.arange(max(0, lo), min(n, hi) + 1)
        cdf = special.bdtr(k, n, p)
        i = int(np.searchsorted(cdf, a, side="left"))
        if 0 < i < len(k) or (i == 0 and k[0] == 0) or (i == len(k) and k[-1] == n):
            return int(k[min(i, len(k) - 1)])
    return int(k[min(i, len(k) - 1)])


def ci_ranks(n: int, q: float, level: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks (l, u) with P(x_(l) <= true quantile < x_(u)) >= level; None where out of 1..n."""
    alpha = (1.0 - level) / 2.0
    lo = binom_ppf(alpha, n, q)
    hi = binom_ppf(1.0 - alpha, n, q) + 1
    return (lo if lo >= 1 else None), (hi if hi <= n else None)


def stats(values: np.ndarray, scale: float = 1.0) -> Stats:
    """The summary's Stats block (n, mean, std, min, max, percentiles) plus ci95 and warnings.

    `scale` multiplies every reported value (1000 turns seconds into milliseconds).
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return _empty()

    # one partition serves every percentile, both ends and every interval bound
    positions = {p: (n - 1) * p / 100.0 for p in PERCENTILES}
    bounds = {p: ci_ranks(n, p / 100.0) for p in PERCENTILES}
    kth = {0, n - 1}
    for p, h in positions.items():
        kth.update((int(np.floor(h)), int(np.ceil(h))))
        kth.update(r - 1 for r in bounds[p] if r is not None)
    part = np.partition(x, sorted(kth))

    values_at: dict[str, float] = {}
    for p, h in positions.items():
        lo_i, hi_i = int(np.floor(h)), int(np.ceil(h))
        value = part[lo_i] + (part[hi_i] - part[lo_i]) * (h - lo_i)
        values_at[pkey(p)] = float(value) * scale
    ci95 = {pkey(p): [None if r is None else float(part[r - 1]) * scale for r in bounds[p]] for p in PERCENTILES}
    return Stats(
        n=n,
        mean=float(x.mean()) * scale,
        std=float(x.std()) * scale,
        min=float(part[0]) * scale,
        max=float(part[n - 1]) * scale,
        **values_at,
        ci95=Ci95(**ci95),
        warnings=sample_warnings(n),
    )


def _empty() -> Stats:
    """Stats of no samples: every value null."""
    nulls: dict[str, Any] = {pkey(p): None for p in PERCENTILES}
    return Stats(
        n=0,
        mean=None,
        std=None,
        min=None,
        max=None,
        **nulls,
        ci95=Ci95(**{pkey(p): [None, None] for p in PERCENTILES}),
        warnings=["no samples"],
    )


def sample_warnings(n: int) -> list[str]:
    """Draft 5.1.4.3: P99 needs >= 1000 samples and P99.9 >= 10000 for 10% relative error at 95%."""
    return [
        f"P{p:g} from {n} samples: the draft (5.1.4.3) asks for at least {need}"
        for p, need in MIN_SAMPLES.items()
        if n < need
    ]


def stats_weighted(values: np.ndarray, weights: np.ndarray, scale: float = 1.0) -> Stats:
    """stats() of the multiset where values[i] occurs weights[i] times, without expanding it."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=np.int64)
    keep = np.isfinite(v) & (w > 0)
    v, w = v[keep], w[keep]
    n = int(w.sum())
    if n == 0:
        return stats(np.zeros(0), scale)
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)

    def at(rank0: int) -> float:  # 0-based order statistic of the expanded multiset
        return float(v[np.searchsorted(cum, rank0, side="right")])

    mean = float(np.dot(v, w) / n)
    values_at: dict[str, float] = {}
    for p in PERCENTILES:
        h = (n - 1) * p / 100.0
        lo = int(np.floor(h))
        a, b = at(lo), at(int(np.ceil(h)))
        values_at[pkey(p)] = (a + (b - a) * (h - lo)) * scale
    ci95 = {pkey(p): [None if r is None else at(r - 1) * scale for r in ci_ranks(n, p / 100.0)] for p in PERCENTILES}
    return Stats(
        n=n,
        mean=mean * scale,
        std=float(np.sqrt(np.dot(w, (v - mean) ** 2) / n)) * scale,
        min=float(v[0]) * scale,
        max=float(v[-1]) * scale,
        **values_at,
        ci95=Ci95(**ci95),
        warnings=sample_warnings(n),
    )
