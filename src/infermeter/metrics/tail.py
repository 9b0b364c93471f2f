"""How an ITL distribution's tail behaves (the IETF draft, 5.4.4.3 "characterize tail: exponential, heavy-tailed"):
peaks over a threshold.  The gaps beyond the 90th percentile are fitted by a generalized Pareto distribution and by
its exponential special case (shape 0); a likelihood-ratio test says whether the shape differs from 0: above it the
tail is heavy (a power law: rare pauses far longer than the typical gap), below it bounded (light)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

THRESHOLD_Q = 0.90  # exceedances over the 90th percentile form the tail
MIN_EXCEEDANCES = 50
MAX_EXCEEDANCES = 20_000  # an even subsample beyond this: deterministic, and plenty for two parameters
ALPHA = 0.01  # the likelihood-ratio test's level
METHOD = "peaks over the P90: generalized Pareto against exponential fits of the excesses, likelihood-ratio test at 1%"


@dataclass(frozen=True)
class TailShape:
    """The tail's class ("exponential", "heavy-tailed", "light-tailed" or "too few samples"), the fitted shape
    xi (0: exponential), the test's p-value and what it was fitted on."""

    kind: str
    xi: float | None
    p: float | None
    threshold_ms: float | None
    exceedances: int

    def describe(self) -> str:
        if self.xi is None or self.p is None:
            return f"too few samples ({self.exceedances} gaps beyond the P90, {MIN_EXCEEDANCES} needed)"
        beyond = f"{self.exceedances} gaps beyond {self.threshold_ms:.2f} ms"
        return f"{self.kind} (shape {self.xi:+.3f}, p {self.p:.2g}, {beyond})"


def tail_shape(samples_ms: np.ndarray) -> TailShape:
    """Classify the tail of positive samples (zero gaps of chunked delivery are not part of the ITL's tail)."""
    from scipy import stats

    v = np.asarray(samples_ms, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return TailShape("too few samples", None, None, None, 0)
    threshold = float(np.quantile(v, THRESHOLD_Q))
    excess = v[v > threshold] - threshold
    if len(excess) < MIN_EXCEEDANCES or not np.any(excess > 0):
        return TailShape("too few samples", None, None, threshold, len(excess))
    if len(excess) > MAX_EXCEEDANCES:
        excess = np.sort(excess)[np.linspace(0, len(excess) - 1, MAX_EXCEEDANCES).astype(int)]
    exp_scale = float(excess.mean())
    ll_exp = float(stats.expon.logpdf(excess, scale=exp_scale).sum())
    xi, _, scale = stats.genpareto.fit(excess, floc=0)
    ll_gpd = float(stats.genpareto.logpdf(excess, xi, loc=0, scale=scale).sum())
    if not np.isfinite(ll_gpd) or ll_gpd < ll_exp:  # the optimiser stopped short of its own special case
        xi, ll_gpd = 0.0, ll_exp
    p = float(stats.chi2.sf(max(2 * (ll_gpd - ll_exp), 0.0), 1))
    kind = "exponential" if p >= ALPHA else "heavy-tailed" if xi > 0 else "light-tailed"
    return TailShape(kind, float(xi), p, threshold, int(np.sum(v > threshold)))
