"""The embedded emulator's load points measured, not assumed: a short closed-loop run that keeps more requests in
flight than the engine batches gives the completion rate it sustains on the suite's own workload, and the suite's
levels are shares of that rate.  A server at --url is given its rate by the user (or a finished suite)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from infermeter.emulator.config import EmulatorConfig
from infermeter.errors import UserError
from infermeter.metrics.columns import RecordColumns
from infermeter.suites.lab import Lab

MIDDLE = (0.1, 0.9)  # completions between these shares of the run: no ramp-up, no drain
MAX_PROBE_CONCURRENCY = 64
PROBE_KEY = "probe-capacity"  # the probe run's directory under runs/ and its level


@dataclass(frozen=True)
class Capacity:
    """A rate the suite's levels are shares of, and where it came from (a sentence for the report)."""

    rate: float
    source: str


def completion_rate(cols: RecordColumns) -> float | None:
    """Successful completions per second between the 10th and the 90th percentile completion."""
    done = np.sort(cols.tokens.last()[cols.ok])
    done = done[np.isfinite(done)]
    if len(done) < 5:
        return None
    i, j = (int(q * (len(done) - 1)) for q in MIDDLE)
    span = float(done[j] - done[i])
    return (j - i) / span if span > 0 else None


def probe_concurrency(emulator: EmulatorConfig | None) -> int:
    """Twice the engine's batch (at least 8, at most 64): every step full, a queue behind it."""
    seqs = getattr(emulator.engine.scheduler, "max_num_seqs", None) if emulator is not None else None
    return int(min(max(2 * (seqs or 32), 8), MAX_PROBE_CONCURRENCY))


def emulator_capacity(lab: Lab, workload: dict[str, Any], what: str = "the emulator") -> Capacity:
    """The embedded emulator's request rate at capacity on `workload`, measured by a closed-loop run."""
    concurrency = probe_concurrency(lab.emulator)
    requests = concurrency * (2 if lab.quick else 8)
    cfg = lab.config(workload=workload, load={"concurrency": concurrency, "requests": requests})
    run = lab.run(PROBE_KEY, f"capacity probe: closed loop at concurrency {concurrency}", cfg, level=PROBE_KEY)
    rate = completion_rate(run.columns())
    if rate is None:
        raise UserError(f"the capacity probe of {what} completed too few requests to give a rate: see {run.run_dir}")
    rate = float(f"{rate:.4g}")
    source = (
        f"the capacity of {what} measured by a closed-loop probe: {rate:g} req/s completed at concurrency "
        f"{concurrency} ({requests} requests; completions per second between the 10th and 90th percentile completion)"
    )
    return Capacity(rate, source)
