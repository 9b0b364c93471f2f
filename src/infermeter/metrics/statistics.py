"""Summary statistics with distribution-free confidence intervals for percentiles, and sample-count warnings.

Percentiles use linear interpolation between order statistics (numpy's default, as vLLM's benchmark does).
The 95% interval of a percentile q is [x_(l), x_(u)], the order statistics whose ranks l and u bracket the
binomial(n, q) count of samples below the true quantile with at least 95% probability; a side that would need
a rank outside 1..n is reported as null (too few samples for that bound).
"""

from __future__ import annotations

from collections.abc import Callable
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

    `scale` multiplies every reported value (1000 turns seconds into milliseconds).  An array of more than BIG
    values is summarized in one pass over it (`_one_pass`), never copied.
    """
    x = np.asarray(values, dtype=float)
    found = _one_pass(x) if len(x) > BIG else None
    if found is not None:
        n, mean, std, at = found
    else:
        finite = np.isfinite(x)
        if not finite.all():
            x = x[finite]
        del finite
        n = len(x)
        if n == 0:
            return _empty()
        part = np.partition(x, _ranks(n))  # one partition serves every percentile, both ends and every bound
        mean, std, at = float(x.mean()), float(x.std()), lambda r: float(part[r])

    values_at: dict[str, float] = {}
    for p in PERCENTILES:
        h = (n - 1) * p / 100.0
        lo_i, hi_i = int(np.floor(h)), int(np.ceil(h))
        value = at(lo_i) + (at(hi_i) - at(lo_i)) * (h - lo_i)
        values_at[pkey(p)] = float(value) * scale
    ci95 = {pkey(p): [None if r is None else at(r - 1) * scale for r in ci_ranks(n, p / 100.0)] for p in PERCENTILES}
    return Stats(
        n=n,
        mean=mean * scale,
        std=std * scale,
        min=at(0) * scale,
        max=at(n - 1) * scale,
        **values_at,
        ci95=Ci95(**ci95),
        warnings=sample_warnings(n),
    )


def _ranks(n: int) -> list[int]:
    """The 0-based order statistics of n values that every percentile, both ends and every interval bound need."""
    kth = {0, n - 1}
    for p in PERCENTILES:
        h = (n - 1) * p / 100.0
        kth.update((int(np.floor(h)), int(np.ceil(h))))
        kth.update(r - 1 for r in ci_ranks(n, p / 100.0) if r is not None)
    return sorted(kth)


BIG = 1 << 22  # values: above this, stats take one pass over the array instead of copies of it
SAMPLE = 1 << 16
BLOCK = 1 << 16  # values a pass handles at a time: a block stays in cache while every statistic reads it


def _one_pass(x: np.ndarray) -> tuple[int, float, float, Callable[[int], float]] | None:
    """(n, mean, std, value at a rank) of x's finite values, in one pass a block at a time; None when the sample
    says too few are finite (stats then copies them out).

    A random sample tells, for each percentile, a band of values holding every rank near it (a margin of six
    standard deviations of its rank in the sample, far wider than the percentile's interval); the pass keeps the
    band's values and counts those below it, so each rank is then found in its band alone.  The bands of the upper
    percentiles reach the top (one band, about a tenth of the values).  The mean and the standard deviation come
    from sums of deviations from the sample's median.  Should a band miss a rank after all, None as well."""
    sample = x[np.random.default_rng(0).integers(0, len(x), SAMPLE)]
    sample = np.sort(sample[np.isfinite(sample)])
    if len(sample) < SAMPLE // 2:
        return None
    m = len(sample)
    bands: list[list[float]] = []  # [low, high]: the values low <= v <= high
    for p in PERCENTILES:
        q = p / 100.0
        margin = 6 * np.sqrt(m * q * (1 - q)) + 16
        i, j = int(np.floor(q * m - margin)), int(np.ceil(q * m + margin))
        low = -np.inf if i < 0 or q <= 0.25 else float(sample[i])
        high = np.inf if j >= m or q >= 0.75 else float(sample[j])
        if bands and low <= bands[-1][1]:
            bands[-1][1] = max(bands[-1][1], high)
        else:
            bands.append([low, high])
    center = float(sample[m // 2])
    kept: list[list[np.ndarray]] = [[] for _ in bands]
    below = [0] * len(bands)
    n, s1, s2, lowest, highest = 0, 0.0, 0.0, np.inf, -np.inf
    dev, mask, under = np.empty(BLOCK), np.empty(BLOCK, dtype=bool), np.empty(BLOCK, dtype=bool)
    for start in range(0, len(x), BLOCK):
        b = x[start : start + BLOCK]
        if not np.isfinite(b).all():
            b = b[np.isfinite(b)]
            if not len(b):
                continue
        k = len(b)
        n += k
        d = np.subtract(b, center, out=dev[:k])
        s1 += float(d.sum())
        s2 += float(np.square(d, out=d).sum())  # not np.dot: BLAS threads crawl on a busy machine
        lowest, highest = min(lowest, float(b.min())), max(highest, float(b.max()))
        for i, (low, high) in enumerate(bands):
            if low == -np.inf:
                inside = np.less_equal(b, high, out=mask[:k])
            else:
                inside = np.greater_equal(b, low, out=mask[:k])
                below[i] += k - int(np.count_nonzero(inside))
                if high != np.inf:
                    inside &= np.less_equal(b, high, out=under[:k])
            kept[i].append(b[inside])
    if n == 0:
        return None
    found: dict[int, float] = {0: lowest, n - 1: highest}
    wanted: list[list[int]] = [[] for _ in bands]
    for r in _ranks(n)[1:-1]:
        band = next((i for i, parts in enumerate(kept) if below[i] <= r < below[i] + sum(map(len, parts))), None)
        if band is None:
            return None
        wanted[band].append(r)
    for i, ranks in enumerate(wanted):
        if ranks:
            members = np.partition(np.concatenate(kept[i]), [r - below[i] for r in ranks])
            found.update({r: float(members[r - below[i]]) for r in ranks})
    mean = s1 / n
    return n, center + mean, float(np.sqrt(max(s2 / n - mean * mean, 0.0))), found.__getitem__


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
        ci95=Ci95.model_validate({pkey(p): [None, None] for p in PERCENTILES}),
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
