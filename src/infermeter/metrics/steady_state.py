"""Saturation and steady-state evidence from a run's records (the IETF draft, 5.2.3.1 and 5.2.3.2): requests in
flight over the window (the queue as the client sees it) and whether it grows, and whether completions keep pace."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infermeter.metrics.columns import RecordColumns

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


@dataclass(frozen=True)
class OutputFlow:
    """Output tokens offered and delivered per second: completion_ratio's test in tokens.  Offered: the tokens the
    requests asked for (a successful request: the tokens it was answered with, as its end of stream decided; a failed
    one: its max_tokens, none delivered) over the span from the first submission to the last; delivered: the tokens of
    the successful requests over the span from the first completion to the last.  Each rate leaves out its first event
    ((n - 1) intervals over the span), so a stable server's drain after the last arrival does not count against it
    and a saturated one, delivering at its capacity, shows a lower rate."""

    offered_tok_s: float
    delivered_tok_s: float

    @property
    def ratio(self) -> float:
        return self.delivered_tok_s / self.offered_tok_s if self.offered_tok_s > 0 else 1.0


def _rate(at: np.ndarray, tokens: np.ndarray) -> float | None:
    """Tokens per second of events at `at` (finite ones), the first event's tokens left out; None under 2 events."""
    keep = np.isfinite(at)
    order = np.argsort(at[keep], kind="stable")
    times, counts = at[keep][order], tokens[keep][order].astype(float)
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return float(counts[1:].sum() / (times[-1] - times[0]))


def output_flow(
    submitted: np.ndarray, asked: np.ndarray, finished_ok: np.ndarray, delivered: np.ndarray
) -> OutputFlow | None:
    """The run's OutputFlow from each request's submission time and the tokens it asked for, and its completion time
    (inf: not successful) and the tokens it delivered; None where fewer than 3 requests were sent over a span (the
    same bound as completion_ratio: no rate of arrivals to hold the completions against)."""
    if np.isfinite(submitted).sum() < 3:
        return None
    offered = _rate(submitted, asked)
    if offered is None:
        return None
    return OutputFlow(offered, _rate(finished_ok, delivered) or 0.0)


STABILITY_SLICES = 5
STABLE_CV = 0.10  # 5.2.3.2: output throughput steady within 10% across the window (as 4.5.2 asks of probes)


@dataclass(frozen=True)
class SteadyWindow:
    """A level's steady window (the sending window less its first 10%, 5.2.3.2): the requests sent in it, what was
    delivered in it per second, and how evenly: output tokens per second in each of STABILITY_SLICES equal slices,
    and their coefficient of variation (stable at or under STABLE_CV)."""

    start: float
    end: float
    sent: np.ndarray  # mask over the run's requests: submitted within [start, end]
    output_tok_s: float  # output tokens of successful requests received within the window, per second
    input_tok_s: float  # prompt tokens of the successful requests sent within it, per second
    req_s: float  # successful requests completed within it, per second
    slice_tok_s: tuple[float, ...]
    cv: float | None

    @property
    def stable(self) -> bool:
        return self.cv is not None and self.cv <= STABLE_CV

    def describe(self) -> str:
        cv = "n/a" if self.cv is None else f"{100 * self.cv:.1f}%"
        return (
            f"steady window {self.start:.1f}-{self.end:.1f} s (the first {100 * RAMP:g}% of sending excluded): output "
            f"throughput varies {cv} across {STABILITY_SLICES} slices ({'stable' if self.stable else 'NOT stable'}, "
            f"<= {100 * STABLE_CV:g}% allowed)"
        )


def steady_window(cols: RecordColumns) -> SteadyWindow:
    """The steady window of a run's records (successful requests' tokens, sending window less its first 10%)."""
    submitted, ok = cols.submitted_at, cols.ok
    tokens = cols.tokens.keep_requests(ok)
    token_times = tokens.values[: tokens.offsets[-1]]
    finished, input_tokens = tokens.last(), cols.input_tokens
    sub = submitted[np.isfinite(submitted)]
    lo, hi = (float(sub.min()), float(sub.max())) if len(sub) else (0.0, 0.0)
    a, b = lo + RAMP * (hi - lo), hi
    sent = (submitted >= a) & (submitted <= b)
    span = b - a
    if span <= 0:
        return SteadyWindow(a, b, sent, 0.0, 0.0, 0.0, (), None)
    good = token_times
    edges = np.linspace(a, b, STABILITY_SLICES + 1)
    counts = np.histogram(good, bins=edges)[0]
    per_slice = counts / (span / STABILITY_SLICES)
    mean = float(per_slice.mean())
    done = ok & np.isfinite(finished) & (finished >= a) & (finished <= b)
    return SteadyWindow(
        a,
        b,
        sent,
        output_tok_s=float(counts.sum()) / span,
        input_tok_s=float(input_tokens[sent & ok].sum()) / span,
        req_s=float(done.sum()) / span,
        slice_tok_s=tuple(float(v) for v in per_slice),
        cv=float(per_slice.std() / mean) if mean > 0 else None,
    )
