"""Scheduling fairness (draft 5.6.4): Jain's index over normalized latency, starvation rate per class."""

from __future__ import annotations

import numpy as np

from infermeter.metrics.columns import distinct

STARVATION_FACTOR = 5.0


def jain_index(x: np.ndarray) -> float | None:
    """J = (sum x)^2 / (n * sum x^2); 1.0 is perfectly fair, below 0.9 significantly unfair."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) == 0 or not np.any(x):
        return None
    return float(x.sum() ** 2 / (len(x) * np.square(x).sum()))


def starvation_rate(wait: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """Per class, the share of requests waiting longer than 5x the median wait of their class."""
    out: dict[str, float] = {}
    for name in distinct(classes):
        w = wait[(classes == name) & np.isfinite(wait)]
        if len(w) == 0:
            continue
        out[name] = float(np.mean(w > STARVATION_FACTOR * np.median(w)))
    return out
