"""`simulate`: one engine configuration on a virtual clock, written as a run directory, as `infermeter sim` makes it;
the command and the Python API share the plan, the simulation and the text it prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.config.engine import SimEngine
from infermeter.config.section import Given
from infermeter.config.sections import DATASET_FIELDS, Load, Objectives, Workload
from infermeter.exports.spec import ExportSpec
from infermeter.python_api.options import Fields, checked, given_from, output_path
from infermeter.python_api.preflight import Voice

if TYPE_CHECKING:
    from rich.console import Console

    from infermeter.engine.config import EngineConfig
    from infermeter.engine.multi_bin import BinEdges
    from infermeter.metrics.summary_model import Summary
    from infermeter.python_api.run_handle import Run
    from infermeter.sim.run import TokenTimes
    from infermeter.workload.spec import Requests

SIM_WORKLOAD = ("workload", "trace", "rps_scale", *DATASET_FIELDS, "tokenizer")
SIM_FIELDS = (
    Fields("workload", Workload, only=SIM_WORKLOAD, defaults={"workload": "synthetic-skewed"}),
    Fields("load", Load, only=("requests", "rate", "arrival", "burstiness"), defaults={"requests": 1000}),
    Fields("engine", SimEngine),
    Fields("objectives", Objectives),
    Fields("workload", Workload, only=("seed",)),
)
TOKEN_TIMES: tuple[TokenTimes, ...] = ("auto", "full", "endpoints")
DEFAULT_OUT = Path("runs/sim")
OWN = ("token_times", "out", "progress", "report", "export")  # simulate's parameters besides the fields


@dataclass(frozen=True)
class SimulationPlan:
    """A simulation ready to run: its requests built, its engine resolved, the directory it writes."""

    requests: Requests
    declaration: dict[str, Any]  # the workload's declaration, as run.json keeps it
    engine: EngineConfig
    engines: int
    seed: int
    slo: dict[str, float] | None
    deadlines: str | None
    token_times: TokenTimes
    out: Path

    @property
    def label(self) -> str:
        """What a progress bar calls it."""
        return f"simulating {self.engine.scheduler.name} x {self.engines}"


@dataclass(frozen=True)
class Simulated:
    """A finished simulation: its run directory, its summary, and the multi-bin edges it ran with (none for other
    schedulers), which the text says how they were obtained."""

    out: Path
    summary: Summary
    bins: list[BinEdges] = field(default_factory=list)


def plan_simulation(given: Given, token_times: str, out: Path, voice: Voice = "command") -> SimulationPlan:
    """The simulation of the options given (as `infermeter sim` takes them); refuses an `out` holding a run (the
    message naming it for `voice`: the command line, or a Python caller)."""
    from infermeter.config.sim import simulated_load
    from infermeter.metrics.goodput import parse_slo
    from infermeter.python_api.preflight import refuse_existing_run

    source, load = simulated_load(given)
    engine = SimEngine.from_options(given.get("engine", {}))
    objectives = Objectives.from_options(given.get("objectives", {}))
    assert load.requests is not None, "a simulation's requests have a default"
    requests, declaration = source.build(load.requests)
    config = engine.engine_config()
    refuse_existing_run(out, voice)
    mode = next(m for m in TOKEN_TIMES if m == token_times)  # checked by the caller: nothing else comes here
    slo = parse_slo(objectives.slo) if objectives.slo else None
    return SimulationPlan(
        requests, declaration, config, engine.engines, source.seed, slo, objectives.deadlines, mode, out
    )  # fmt: skip


def run_simulation(plan: SimulationPlan, console: Console | None = None) -> Simulated:
    """Simulate and write the run directory as the simulation goes, with a progress bar on `console` if given."""
    from rich.progress import Progress

    from infermeter.sim.run import simulate_run

    used: list[BinEdges] = []
    with Progress(console=console, transient=True, disable=console is None) as bar:
        task = bar.add_task(plan.label, total=len(plan.requests))
        summary = simulate_run(
            plan.requests, plan.engine, plan.engines, plan.seed, plan.out, plan.declaration, plan.token_times,
            slo=plan.slo, deadlines=plan.deadlines, progress=lambda done: bar.update(task, completed=done), bins=used,
        )  # fmt: skip
    return Simulated(plan.out, summary, used)


def sim_text(done: Simulated) -> str:
    """What a finished simulation prints: the full report, the simulator's table, the bins, where the run is."""
    from infermeter.records import read_run_info
    from infermeter.report.console import full_report, sim_table

    parts = [full_report(done.summary, read_run_info(done.out)), sim_table(done.summary)]
    parts += [b.describe() for b in done.bins]
    return "\n\n".join([*parts, f"run directory: {done.out}"])


def simulate(
    *,
    token_times: str = "auto",
    out: str | PathLike[str] = DEFAULT_OUT,
    progress: bool = False,
    report: bool = False,
    export: Iterable[ExportSpec | str] | ExportSpec | str = (),
    **options: Any,
) -> Run:
    """Simulate one engine configuration on a virtual clock, as `infermeter sim` does, and return the run directory
    it wrote as a `Run` (its records and summary are those of a live run: every metric applies).

    `options` are `infermeter sim`'s, named as its configuration fields (`requests`, `rate`, `arrival`, `workload`,
    `trace`, `scheduler`, `engines`, `bins`, `kv_tokens`, `slo`, `deadlines`, `seed`, ...), given as Python values or
    as the command line's strings; the defaults are its own (1000 requests of Synthetic-Skewed, all arriving at t=0
    without a rate).  `token_times` is "auto", "full" or "endpoints" (which token times the records keep); `out`
    the run directory (default runs/sim, refused when it holds a run); `export` sends the results at the end.
    Nothing is printed unless asked: `progress=True` shows a progress bar on stderr, `report=True` prints the
    report `infermeter sim` prints.

    A simulation is synchronous, a few seconds for thousands of requests; from a running event loop,
    `await asyncio.to_thread(infermeter.simulate, ...)` keeps the loop free.

    >>> import tempfile, infermeter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     run = infermeter.simulate(requests=100, rate=5, scheduler="chunked_prefill", out=tmp + "/sim")
    ...     print(run.info.kind, run.summary.requests.total, run.summary.sim is not None)
    simulated 100 True
    """
    from rich.console import Console

    from infermeter.config import checks
    from infermeter.python_api.exporting import check, export_specs, send_run, warn
    from infermeter.python_api.run_handle import Run

    given = given_from(options, SIM_FIELDS, "simulate", "infermeter sim", OWN)
    mode = checked("token_times", token_times, checks.choice(*TOKEN_TIMES))
    run_dir = output_path("out", out)
    assert run_dir is not None, "simulate's out has a default"
    specs = export_specs(export)
    plan = plan_simulation(given, mode, run_dir, "api")
    check(specs)
    done = run_simulation(plan, Console(stderr=True) if progress else None)
    if report:
        print(sim_text(done), flush=True)
    warn(send_run(specs, done.out))
    return Run(done.out)
