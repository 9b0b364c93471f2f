"""The load a run applied, as meaning rather than wording (the IETF draft's 6.1 "same load model and parameters"): a
prediction describes "poisson at 0.757 req/s" where the live run it predicts says "open-loop poisson at 0.757 req/s,
3 s"; both are read into the same structure (loop, arrival process, rate, concurrency, request count, duration).

Suites compared level by level hold each level at a load relative to each system's own capacity, so the absolute
parameters (rate, concurrency, a trace's time scale, the bounds) differ by design; what the plan fixes is the model's
kind (PLAN: the loop, the arrival process and its burstiness, a closed loop's simultaneous start)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TypedDict

from pydantic import ValidationError

from infermeter.run_info import RunInfo
from infermeter.workload.arrivals import ArrivalSpec

SIGNIFICANT = 6  # digits a rate or duration is compared to (what run.json's descriptions print, :g)
PLAN = ("loop", "arrival", "burstiness", "barrier")  # what a suite's plan holds alike at one level for every system


def _round(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.{SIGNIFICANT}g}")


class _Bounds(TypedDict):
    """A load's bounds, as LoadModel's keyword arguments."""

    requests: int | None
    duration_s: float | None


@dataclass(frozen=True)
class LoadModel:
    """What makes two loads the same: open loop (an arrival process at a rate), closed loop (requests kept in
    flight) or offline (every request at t=0), and the bounds (requests, seconds)."""

    loop: str  # "open", "closed", "offline"
    arrival: str | None = None  # poisson, gamma, constant, uniform, trace
    rate: float | None = None  # requests/s
    burstiness: float | None = None  # gamma's shape
    time_scale: float | None = None  # a trace's gaps divided by this
    concurrency: int | None = None
    barrier: bool = False
    requests: int | None = None
    duration_s: float | None = None

    @classmethod
    def of(cls, info: RunInfo) -> LoadModel:
        """The load of a run from run.json's structured blocks (load.arrivals, else the workload's arrivals, which
        a simulated run declares alone); the free-text description is never read."""
        load = info.load
        arrivals = load.arrivals or info.workload.arrivals
        if load.concurrency is not None:
            return cls("closed", concurrency=load.concurrency, barrier=load.barrier, **cls._bounds(info))
        if arrivals is None:
            return cls("offline", **cls._bounds(info))
        return cls(
            "open",
            arrival=arrivals.kind,
            rate=_round(arrivals.rate) if arrivals.kind != "trace" else None,
            burstiness=_round(arrivals.burstiness) if arrivals.kind == "gamma" else None,
            time_scale=_round(arrivals.time_scale) if arrivals.kind == "trace" else None,
            **cls._bounds(info),
        )

    @staticmethod
    def _bounds(info: RunInfo) -> _Bounds:
        return {"requests": info.load.requests, "duration_s": _round(info.load.duration_s)}

    def _process(self) -> str:
        """The arrival process in the words of workload.arrivals.ArrivalSpec.describe (its one definition)."""
        try:
            spec = ArrivalSpec.model_validate(
                {
                    "kind": self.arrival,
                    "rate": self.rate,
                    "burstiness": self.burstiness if self.burstiness is not None else 1.0,
                    "time_scale": self.time_scale if self.time_scale is not None else 1.0,
                }
            )
        except ValidationError:  # a kind this version does not know (a newer run.json): its name
            return str(self.arrival)
        return spec.describe()

    def describe(self) -> str:
        """The load in one line, e.g. "open loop, poisson at 2 req/s, 20 requests"."""
        if self.loop == "closed":
            text = f"closed loop, {self.concurrency} in flight" + (", simultaneous start" if self.barrier else "")
        elif self.loop == "offline":
            text = "every request at t=0"
        else:
            text = f"open loop, {self._process()}"
        text += f", {self.requests} requests" if self.requests is not None else ""
        return text + (f", {self.duration_s:g} s" if self.duration_s is not None else "")

    def kind(self) -> str:
        """What the plan fixes (PLAN), in words: the loop and the arrival process, without the absolute load."""
        if self.loop == "closed":
            return "closed loop" + (", simultaneous start" if self.barrier else "")
        if self.loop == "offline":
            return "every request at t=0"
        burst = f", burstiness {self.burstiness:g}" if self.burstiness is not None else ""
        return f"open loop, {self.arrival}{burst}"


def differing(loads: list[LoadModel], names: tuple[str, ...] | None = None) -> list[str]:
    """The parameters (all of them, or those `names`) in which these loads differ (none: the same load)."""
    chosen = [f.name for f in fields(LoadModel) if names is None or f.name in names]
    return [name for name in chosen if len({getattr(m, name) for m in loads}) > 1]
