"""Arrival processes for open-loop load (draft 4.2.3): when each request should be sent, as offsets from start.

Offsets are computed up front so a load driver can send at absolute times (draft 4.2.5).  The first request is
sent at offset 0 and each later one after a gap drawn from the process, as vLLM's benchmark client does.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

ArrivalKind = Literal["poisson", "gamma", "constant", "uniform", "trace"]
# constant offsets are rounded to the nanosecond, so that a rate and a duration given in decimals send exactly
# ceil(rate x duration) requests in [0, duration): 0.3 req/s is not exactly 0.3 in binary, and 10 / 0.3 must be 10
NS_DECIMALS = 9


class ArrivalSpec(BaseModel):
    """How requests arrive: a rate with a process, or the trace's own timestamps scaled in time."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ArrivalKind = "poisson"
    rate: float | None = Field(default=None, gt=0, description="requests per second (not for 'trace')")
    burstiness: float = Field(default=1.0, gt=0, description="gamma shape; 1 = Poisson, <1 burstier")
    time_scale: float = Field(default=1.0, gt=0, description="trace: divide gaps by this (RPS scaling)")

    @model_validator(mode="after")
    def _needs_rate(self) -> ArrivalSpec:
        if self.kind != "trace" and self.rate is None:
            raise ValueError(f"arrival process '{self.kind}' needs a rate (requests per second)")
        if self.kind != "gamma" and self.burstiness != 1.0 and self.kind != "trace":
            raise ValueError("burstiness applies to the gamma arrival process only")
        return self

    def describe(self) -> str:
        if self.kind == "trace":
            return f"trace timestamps, gaps divided by {self.time_scale:g}"
        extra = f", burstiness {self.burstiness:g}" if self.kind == "gamma" else ""
        return f"{self.kind} at {self.rate:g} req/s{extra}"


def gaps(spec: ArrivalSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """n inter-arrival gaps with mean 1/rate drawn from the process (not for traces)."""
    assert spec.rate is not None
    mean = 1.0 / spec.rate
    if spec.kind == "poisson":
        return rng.exponential(mean, size=n)
    if spec.kind == "gamma":
        # shape k = burstiness and scale = mean / k keep the mean gap at 1/rate; CV = 1/sqrt(k)
        return rng.gamma(shape=spec.burstiness, scale=mean / spec.burstiness, size=n)
    if spec.kind == "constant":
        return np.full(n, mean)
    if spec.kind == "uniform":
        return rng.uniform(0.0, 2.0 * mean, size=n)
    raise ValueError(f"no gap process for arrival kind {spec.kind!r}")


def arrival_offsets(spec: ArrivalSpec, n: int, seed: int, trace_timestamps: np.ndarray | None = None) -> np.ndarray:
    """Send offsets in seconds for n requests, starting at 0 and non-decreasing."""
    if n <= 0:
        return np.zeros(0)
    if spec.kind == "trace":
        if trace_timestamps is None or len(trace_timestamps) < n:
            have = 0 if trace_timestamps is None else len(trace_timestamps)
            raise ValueError(f"trace arrivals need {n} timestamps, the trace has {have}")
        ts = np.asarray(trace_timestamps[:n], dtype=float)
        if np.any(np.diff(ts) < 0):
            raise ValueError("trace timestamps must be sorted (the trace loaders sort them)")
        return (ts - ts[0]) / spec.time_scale
    if spec.kind == "constant":  # k / rate, not a running sum of 1 / rate: 50 req/s x 20 s is 1,000 sends, not 1,001
        assert spec.rate is not None
        return np.round(np.arange(n) / spec.rate, NS_DECIMALS)
    rng = np.random.default_rng([seed, 0xA77])
    out = np.zeros(n)
    out[1:] = np.cumsum(gaps(spec, n - 1, rng))
    return out


def ramped(offsets: np.ndarray, ramp_s: float) -> np.ndarray:
    """Offsets drawn at a steady rate R, warped so the rate rises linearly from 0 to R over the first `ramp_s` seconds
    and stays R after (--ramp-up): the cumulative rate R t^2 / (2 ramp_s), then R (t - ramp_s / 2), inverted.

    An offset u of the steady process (u / R arrivals' worth of time) goes to sqrt(2 ramp_s u) while u < ramp_s / 2,
    else to u + ramp_s / 2; order and the steady gaps after the ramp are kept, and R itself is not needed."""
    u = np.asarray(offsets, dtype=float)
    if ramp_s <= 0 or u.size == 0:
        return u.copy()
    half = ramp_s / 2.0
    return np.where(u < half, np.sqrt(2.0 * ramp_s * np.minimum(u, half)), u + half)
