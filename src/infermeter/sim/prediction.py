"""A prediction's simulations: the engine under a load, and the two ends of its calibration's error band (for each
figure's interval), here with progress or as tasks of a `TaskMap`; then the run directory and the intervals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infermeter.distributed.tasks import TaskMap
from infermeter.engine.config import EngineConfig
from infermeter.metrics.summary_model import Summary
from infermeter.sim.predict import FigureInterval, bound_engines, figure_intervals, save_intervals, unreliable
from infermeter.sim.run import outcome_summary, write_sim_run
from infermeter.sim.simulator import SimOutcome, SimTask, simulate, simulate_task
from infermeter.workload.spec import Requests


@dataclass(frozen=True)
class Prediction:
    """The requests, the engine (settings applied), the pool's size, the seed, and a closed loop's concurrency."""

    requests: Requests
    engine: EngineConfig
    engines: int
    seed: int
    concurrency: int | None = None

    def tasks(self) -> list[SimTask]:
        """The nominal simulation, then the band's two ends when the calibration held probes out of its fits."""
        ends = bound_engines(self.engine) or ()
        return [SimTask(self.requests, e, self.engines, self.seed, self.concurrency) for e in (self.engine, *ends)]

    def simulate(self, progress: Callable[[int], None]) -> list[SimOutcome]:
        """Every task here, one after another; `progress` gets the requests done over all of them."""
        n = len(self.requests)
        return [
            simulate(
                task.requests,
                task.config,
                task.engines,
                task.seed,
                progress=_after(k * n, progress),
                concurrency=task.concurrency,
            )
            for k, task in enumerate(self.tasks())
        ]

    def simulate_on(self, tasks: TaskMap) -> list[SimOutcome]:
        """Every task as a task of `tasks` (dask workers)."""
        return list(tasks(simulate_task, self.tasks()))


def _after(start: int, progress: Callable[[int], None]) -> Callable[[int], None]:
    """`progress` of one simulation, counted on from the `start` requests the ones before it did."""
    return lambda done: progress(start + done)


def write_prediction(
    outcomes: list[SimOutcome],
    out: Path,
    declaration: dict[str, Any],
    prediction: Prediction,
    slo: dict[str, float] | None,
) -> tuple[Summary, list[FigureInterval] | None]:
    """The nominal outcome's run directory and summary; with the band's ends, each figure's interval, saved beside
    it (None without them)."""
    nominal, *banded = outcomes
    seed, concurrency = prediction.seed, prediction.concurrency
    summary = write_sim_run(nominal, out, declaration, seed, slo=slo, concurrency=concurrency)
    if not banded:
        return summary, None
    low, high = (outcome_summary(o, declaration, seed, concurrency) for o in banded)
    intervals = figure_intervals(summary, low, high, unreliable(prediction.engine.calibration))
    save_intervals(out, intervals)
    return summary, intervals
