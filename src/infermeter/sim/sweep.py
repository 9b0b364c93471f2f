"""A sweep of multi-bin dynamic batching's experiments at its load levels (seeds/004 section 7): the plan, the
directories it claims before anything runs, and its steps level by level (grid search, method comparison,
hypotheses), each simulation a task of a `TaskMap`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from infermeter.distributed.tasks import TaskMap
from infermeter.engine.config import EngineConfig
from infermeter.errors import UserError
from infermeter.records import holds_run
from infermeter.sim.experiments import (
    STEP1_CSV,
    STEP2_CSV,
    claim_sweep_dir,
    read_rows,
    run_experiments,
    step1_grid,
    step2_methods,
)
from infermeter.sim.hypotheses import HypothesisReport, methods, run_hypotheses
from infermeter.sim.requests import RequestSource
from infermeter.workload.spec import Requests
from infermeter.workload.traces import BURSTGPT_RATE

Step = Literal["1", "2", "hypotheses", "both", "all"]
Track = Callable[[str, int], Callable[[], None]]  # a progress line by its label and total -> one step done on it
STEP1_OF = ("1", "both", "all")
STEP2_OF = ("2", "both", "all")
HYPOTHESES_OF = ("hypotheses", "all")


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep runs: the steps, the grid's axes, the load levels (name -> scaling of the base arrivals: a
    trace's own, or `single`'s rate or compression when one was given instead of the levels), the requests' source
    and the multi-bin engine every method is derived from."""

    out: Path
    step: Step
    counts: list[int]
    gpus: list[int]
    bins: list[int]
    levels: dict[str, float]
    single: float | None
    source: RequestSource
    base: EngineConfig

    def arrivals(self, factor: float) -> tuple[float | None, float | None]:
        """A level's (trace compression, synthetic rate): its scaling of the given one, or of BurstGPT's rate."""
        if self.source.trace is not None:
            return (self.single or 1.0) * factor, None
        return None, (self.single or BURSTGPT_RATE) * factor

    def places(self) -> dict[str, Path]:
        """Each level's directory: `out` itself for one level."""
        return {name: self.out if len(self.levels) == 1 else self.out / name for name in self.levels}

    def settings(self, factor: float) -> dict[str, Any]:
        """What a level's rows are simulated under (sweep.json): a resumed sweep must be the same sweep."""
        scale, rate = self.arrivals(factor)
        source = self.source
        return {
            "workload": None if source.trace else source.workload,
            "trace": str(source.trace) if source.trace else None,
            "arrival": source.arrival,
            "burstiness": source.burstiness,
            "seed": source.seed,
            "engine": self.base.model_dump(mode="json"),
            "rps_scale": scale,
            "rate": rate,
        }


@dataclass
class SweepRequests:
    """The requests of each (count, level scaling), made once and shared by the steps that simulate them."""

    plan: SweepPlan
    made: dict[tuple[int, float], Requests] = field(default_factory=dict)

    def get(self, n: int, factor: float) -> Requests:
        if (n, factor) not in self.made:
            self.made[(n, factor)] = self.plan.source.at(*self.plan.arrivals(factor)).build(n)[0]
        return self.made[(n, factor)]


def claim_sweep(plan: SweepPlan, requests: SweepRequests) -> None:
    """Refuse a bad trace or workload, and an `out` that is not a sweep's, before anything runs; then claim every
    level's directory (or resume the sweep it holds)."""
    requests.get(max(plan.counts), next(iter(plan.levels.values())))
    if holds_run(plan.out):
        raise UserError(f"--out {plan.out} holds a single run, not a sweep: choose a new directory")
    if plan.out.exists() and not plan.out.is_dir():
        raise UserError(f"--out {plan.out} is a file: choose a directory for the sweep")
    if plan.step == "hypotheses":
        return
    places = plan.places()
    for name, factor in plan.levels.items():
        claim_sweep_dir(places[name], plan.settings(factor))


def run_level(
    plan: SweepPlan, name: str, requests: SweepRequests, track: Track, tasks: TaskMap
) -> list[dict[str, str]] | None:
    """Steps 1 and 2 at one level, resuming what its directory holds; step 2's rows (None when it does not run)."""
    out, factor, seed = plan.places()[name], plan.levels[name], plan.source.seed

    def make(n: int) -> Requests:
        return requests.get(n, factor)

    if plan.step in STEP1_OF:
        grid = step1_grid(plan.counts, plan.gpus, plan.bins)
        done = track(f"{name}: step 1, grid search", len(grid))
        run_experiments(grid, out / STEP1_CSV, plan.base, make, seed, lambda e, skipped: done(), tasks)
    if plan.step not in STEP2_OF:
        return None
    compared = step2_methods(plan.counts, read_rows(out / STEP1_CSV))
    done = track(f"{name}: step 2, method comparison", len(compared))
    return run_experiments(compared, out / STEP2_CSV, plan.base, make, seed, lambda e, skipped: done(), tasks)


def sweep_hypotheses(plan: SweepPlan, requests: SweepRequests, track: Track, tasks: TaskMap) -> HypothesisReport:
    """H1-H3 at every level, on the smallest request count."""
    done = track("hypotheses H1-H3", len(plan.levels) + len(methods()))
    n, seed = min(plan.counts), plan.source.seed
    return run_hypotheses(plan.base, plan.levels, lambda f: requests.get(n, f), seed, lambda what: done(), tasks)
