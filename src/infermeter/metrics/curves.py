"""Curve analysis over a sweep of load levels or lengths (the IETF draft, sections 5.3.4 and 5.9.4): the knee, the
saturation and optimal operating points, and how latency scales with context length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from infermeter.errors import UserError


def knee_point(p99: Sequence[float | None], factor: float = 2.0) -> int | None:
    """Index of the first level whose P99 latency exceeds `factor` x the minimum P99 of the sweep (5.3.4)."""
    known = [v for v in p99 if v is not None]
    if not known:
        return None
    floor = min(known)
    return next((i for i, v in enumerate(p99) if v is not None and v > factor * floor), None)


def saturation_point(achieved: Sequence[float | None], tolerance: float = 0.0) -> int | None:
    """Index of the first level whose achieved throughput is below the previous level's by more than `tolerance`
    (relative): the draft's "first decreases from previous level", with room for measurement noise."""
    for i in range(1, len(achieved)):
        a, b = achieved[i - 1], achieved[i]
        if a is not None and b is not None and b < a * (1 - tolerance):
            return i
    return None


def optimal_point(achieved: Sequence[float | None], meets: Sequence[bool]) -> int | None:
    """Index of the highest achieved throughput among the levels meeting the SLO (5.3.4)."""
    best = [(a, i) for i, (a, ok) in enumerate(zip(achieved, meets, strict=True)) if ok and a is not None]
    return max(best)[1] if best else None


@dataclass(frozen=True)
class Fit:
    """A least-squares polynomial of y on x (coefficients lowest power first) and its R^2."""

    coefficients: tuple[float, ...]
    r2: float


@dataclass(frozen=True)
class ScalingFit:
    """Linear and quadratic fits of y on x, the power law y = a x^k (fitted in log space), and the better of the two
    polynomials by a nested-model F-test of the x^2 term (quadratic when p < 0.05 with at least 4 points)."""

    linear: Fit
    quadratic: Fit
    k: float
    k_r2: float
    f_p: float | None
    best: Literal["linear", "quadratic"]

    def describe(self, unit: str = "ms") -> str:
        chosen = self.linear if self.best == "linear" else self.quadratic
        test = f"; F-test p = {self.f_p:.2g} for the x^2 term" if self.f_p is not None else ""
        return f"Best fit: {self.best} (R^2 = {chosen.r2:.4f}{test}); TTFT ~ length^{self.k:.2f} (R^2 {self.k_r2:.3f})"


def _poly(x: np.ndarray, y: np.ndarray, degree: int) -> tuple[Fit, float]:
    coef = np.polynomial.polynomial.polyfit(x, y, degree)
    residual = float(np.sum((y - np.polynomial.polynomial.polyval(x, coef)) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    return Fit(tuple(float(c) for c in coef), 1.0 - residual / total if total > 0 else 1.0), residual


def scaling_fit(x: Sequence[float], y: Sequence[float]) -> ScalingFit:
    """How y (e.g. TTFT) scales with x (e.g. context length); needs 3 distinct positive x."""
    from scipy import stats

    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(np.unique(xs)) < 3 or np.any(xs <= 0) or np.any(ys <= 0):
        raise UserError("a scaling fit needs at least 3 distinct positive lengths with positive latencies")
    linear, rss1 = _poly(xs, ys, 1)
    quadratic, rss2 = _poly(xs, ys, 2)
    slope, _, r, _, _ = stats.linregress(np.log(xs), np.log(ys))
    n = len(xs)
    f_p = None
    if n >= 4 and rss2 > 0:
        f = (rss1 - rss2) / (rss2 / (n - 3))
        f_p = float(stats.f.sf(f, 1, n - 3))
    elif n >= 4:
        f_p = 0.0
    best: Literal["linear", "quadratic"] = "quadratic" if f_p is not None and f_p < 0.05 else "linear"
    return ScalingFit(linear, quadratic, float(slope), float(r**2), f_p, best)
