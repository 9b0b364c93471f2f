"""`sim-sweep`'s own options (the grid's axes, the steps, the load levels) and the sweep's plan from every option it
takes: these with the workload, load and engine options a simulation shares."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from infermeter.config import checks
from infermeter.config.engine import MAX_ENGINES, SimEngine
from infermeter.config.section import Flag, Given, Section
from infermeter.config.sim import simulated_load
from infermeter.errors import UserError
from infermeter.workload.traces import LEVELS

if TYPE_CHECKING:
    from infermeter.sim.sweep import SweepPlan


class Sweep(Section):
    """The experiments of a sweep: step 1's grid (request counts x GPUs x bins K), the steps, the load levels."""

    title = "sweep"
    requests: Annotated[
        list[int], Flag("request counts, comma-separated", checks.int_list(1, checks.MAX_REQUESTS), repeatable=True)
    ] = Field(default_factory=lambda: [1000, 10000, 100000, 1000000])
    gpus: Annotated[
        list[int], Flag("GPU counts, comma-separated", checks.int_list(1, MAX_ENGINES), repeatable=True)
    ] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64, 100])
    bins: Annotated[list[int], Flag("K values, comma-separated", checks.int_list(1, 1024), repeatable=True)] = Field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32]
    )
    step: Annotated[
        Literal["1", "2", "hypotheses", "both", "all"],
        Flag(
            "1 (grid), 2 (method comparison), hypotheses (H1-H3 and the section 9.4 capacities on the smallest "
            "--requests), both (1 and 2) or all",
            checks.choice("1", "2", "hypotheses", "both", "all"),
        ),
    ] = "all"
    levels: Annotated[
        str,
        Flag(
            "load levels, comma-separated: high, medium, low (BurstGPT's 0.27 req/s, or a --trace's own arrivals, "
            "scaled 100x, 10x, 1x)",
            checks.choice_list(*LEVELS),
        ),
    ] = ",".join(LEVELS)


def sweep_plan(given: Given, out: Path) -> SweepPlan:
    """The sweep the options describe; --rate and --rps-scale each replace the levels by one of their own."""
    from infermeter.sim.sweep import SweepPlan

    sweep = Sweep.from_options(given.get("sweep", {}))
    source, load = simulated_load(given)
    if load.rate is not None and source.trace is not None:
        raise UserError("--rate sets a synthetic workload's arrivals; a --trace has its own: use --rps-scale")
    rps_scale = given.get("workload", {}).get("rps_scale")  # given, not the workload's default compression
    if rps_scale is not None and source.trace is None:
        raise UserError("--rps-scale compresses a --trace's arrival times: add --trace, or use --rate")
    single = load.rate if source.trace is None else rps_scale
    levels = {"custom": 1.0} if single is not None else {name: LEVELS[name] for name in sweep.levels.split(",")}
    engine = SimEngine.from_options({"scheduler": "multi_bin_dynamic", "bins": 4, **given.get("engine", {})})
    return SweepPlan(
        out=out,
        step=sweep.step,
        counts=sweep.requests,
        gpus=sweep.gpus,
        bins=sweep.bins,
        levels=levels,
        single=single,
        source=source.at(None, None),
        base=engine.engine_config(),
    )
