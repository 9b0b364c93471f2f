"""Saturation and steady-state evidence from a run's records (the IETF draft, 5.2.3.1 and 5.2.3.2): requests in
flight over the window (the queue as the client sees it) and whether it grows, and whether completions keep pace."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RAMP = 0.1  # 5.2.3.2: the first 10% of the duration is ramp-up


def in_flight(submitted: np.ndarray, finished: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Requests submitted at or before each time and not yet finished then."""
    started = np.searchsorted(np.sort(submitted), at, side="right")
    ended = np.searchsorted(np.sort(finished), at, side="right")
    return started - ended


@dataclass(frozen=True)
class QueueTrend:
    """The in-flight count's least-squares slope over the window after the ramp, its levels at the two ends of the
    fit, and the verdict: growing when the fitted rise exceeds both 2 requests and half the mean level."""

    slope_per_s: float
    start_level: float
    end_level: float
    growing: bool


def queue_trend(submitted: np.ndarray, finished: np.ndarray, window: tuple[float, float]) -> QueueTrend:
    lo, hi = window
    t = np.linspace(lo + RAMP * (hi - lo), hi, 50)
    level = in_flight(submitted, finished, t).astype(float)
    slope, intercept = np.polyfit(t, level, 1) if len(t) > 1 and hi > lo else (0.0, float(level.mean()))
    start, end = slope * t[0] + intercept, slope * t[-1] + intercept
    rise = end - start
    return QueueTrend(float(slope), float(start), float(end), bool(rise > max(2.0, 0.5 * float(level.mean()))))


def completion_ratio(submitted: np.ndarray, finished_ok: np.ndarray) -> float | None:
    """The completion rate over the arrival rate (5.2.3.1: saturated below 0.9), each measured between its own first
    and last event ((n - 1) / span), so the drain after the last arrival does not count against a stable server while
    a saturated one, completing at its capacity, shows a lower rate."""
    sub = np.sort(submitted[np.isfinite(submitted)])
    fin = np.sort(finished_ok[np.isfinite(finished_ok)])
    if len(sub) < 3 or sub[-1] <= sub[0]:
        return None
    arrival = (len(sub) - 1) / (sub[-1] - sub[0])
    if len(fin) < 2 or fin[-1] <= fin[0]:
        return 0.0
    return float((len(fin) - 1) / (fin[-1] - fin[0]) / arrival)
