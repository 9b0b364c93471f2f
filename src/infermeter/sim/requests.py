"""Where a simulation's requests come from: a workload (standard or a file), a trace or a dataset, and the process
they arrive by; `sim`, `predict` and each load level of a sweep build theirs from one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.source import WorkloadSource
from infermeter.workload.spec import Requests


@dataclass(frozen=True)
class RequestSource:
    """A workload or a trace (the trace wins: it gives the lengths), arriving at `rate` by `arrival`, or at the
    trace's own times compressed `rps_scale` times; without a rate a workload's requests all arrive at t=0."""

    seed: int
    workload: str | None = None
    trace: Path | None = None
    rps_scale: float = 1.0
    rate: float | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    dataset: WorkloadSource | None = None  # a --dataset read once: its lengths (and its own times, when it has them)

    def build(self, n: int) -> tuple[Requests, dict[str, Any]]:
        """n requests (a dataset's first n, at most all of them), and the declaration run.json keeps."""
        spec = arrival_spec(self.arrival, self.rate, self.burstiness) if self.rate is not None else None
        if self.dataset is not None:
            return self.dataset.draw(min(n, self.dataset.size()), self.seed, spec, self.rps_scale)
        workload = None if self.trace is not None else self.workload
        trace, scale = self.trace, self.rps_scale
        return build_requests(n, self.seed, workload=workload, arrivals=spec, trace=trace, rps_scale=scale)

    def at(self, rps_scale: float | None, rate: float | None) -> RequestSource:
        """The same requests at another trace compression (None: uncompressed) or rate."""
        return replace(self, rps_scale=1.0 if rps_scale is None else rps_scale, rate=rate)
