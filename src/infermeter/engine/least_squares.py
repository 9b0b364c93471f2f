"""Least squares as the calibration fits it: standard errors, non-negative costs, the columns the data can identify,
and the errors on measurements held out of a fit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LinearFit:
    """Least squares with its standard errors, R^2 and residual RMS (in the unit of y)."""

    coef: np.ndarray
    stderr: np.ndarray
    r2: float
    rms: float
    points: int
    rms_relative: float = float("nan")  # RMS of the residuals / the measurements, where a fit reports it


def least_squares(design: np.ndarray, y: np.ndarray) -> LinearFit:
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    n, k = design.shape
    dof = max(n - k, 1)
    sigma2 = float(resid @ resid) / dof
    try:
        cov = sigma2 * np.linalg.inv(design.T @ design)
        stderr = np.sqrt(np.maximum(np.diag(cov), 0.0))
    except np.linalg.LinAlgError:
        stderr = np.full(k, np.nan)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    return LinearFit(coef, stderr, r2, float(np.sqrt(np.mean(resid**2))), n)


def nonnegative_fit(design: np.ndarray, y: np.ndarray, free: int = 1) -> tuple[LinearFit, np.ndarray]:
    """Least squares where every coefficient after the first `free` must be >= 0: a negative one (noise around a
    cost too small to see) is pinned to 0 and the rest refitted.  Returns the fit and which columns it kept."""
    keep = np.ones(design.shape[1], dtype=bool)
    while True:
        fit = least_squares(design[:, keep], y)
        full = np.zeros(design.shape[1])
        full[keep] = fit.coef
        bad = [j for j in range(free, design.shape[1]) if keep[j] and full[j] < 0]
        if not bad:
            err = np.full(design.shape[1], np.nan)
            err[keep] = fit.stderr
            return LinearFit(full, err, fit.r2, fit.rms, fit.points), keep
        keep[min(bad, key=lambda j: full[j])] = False


def identifiable(design: np.ndarray) -> np.ndarray:
    """Columns that vary independently of the ones before them (a batch size never varied cannot be fitted)."""
    keep = np.zeros(design.shape[1], dtype=bool)
    for j in range(design.shape[1]):
        trial = keep.copy()
        trial[j] = True
        sub = design[:, trial]
        scale = np.maximum(np.abs(sub).max(axis=0), 1e-300)
        keep[j] = np.linalg.matrix_rank(sub / scale, tol=1e-6) == int(trial.sum())
    return keep


@dataclass(frozen=True)
class HeldOut:
    """How a fit predicts measurements it was not fitted to: each group left out in turn, fitted on the rest."""

    what: str  # which measurements were held out, in words
    errors: np.ndarray  # each held-out measurement's (predicted - measured) / measured
    weights: np.ndarray | None = None  # how much each measurement says (the gaps a decode step averages); None: alike

    @property
    def rms(self) -> float:
        if not len(self.errors):
            return float("nan")
        return float(np.sqrt(np.average(self.errors**2, weights=self.weights)))

    @property
    def band(self) -> tuple[float, float]:
        """The lowest and highest relative error of a held-out measurement."""
        return (float(self.errors.min()), float(self.errors.max())) if len(self.errors) else (0.0, 0.0)
