"""`predict`: what a calibrated engine would do under a load, with "what if" overrides, on the virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err
from infermeter.config.engine import SimEngine
from infermeter.config.prediction import PredictedEngine
from infermeter.config.section import Given
from infermeter.config.sections import Load, Objectives, Scale, Workload
from infermeter.config.sim import simulated_load
from infermeter.errors import UserError

if TYPE_CHECKING:
    from infermeter.engine.config import EngineConfig
    from infermeter.metrics.summary_model import Summary
    from infermeter.sim.predict import FigureInterval
    from infermeter.sim.prediction import Prediction
    from infermeter.sim.simulator import SimOutcome

PREDICT_PARTS = (
    opt.Part("predicted", PredictedEngine, only=("engine",)),
    opt.Part("load", Load, only=("rate", "concurrency"), help={"rate": opt.ARRIVAL_RATE}),
    opt.Part("workload", Workload, only=("workload", "trace", "rps_scale"), defaults={"workload": "conversation"}),
    opt.Part(
        "load",
        Load,
        only=("requests", "arrival", "burstiness"),
        defaults={"requests": 500},
        help={"requests": opt.REQUESTS_TO_SEND},
    ),
    opt.Part("predicted", PredictedEngine, only=("set_",)),
    opt.Part("engine", SimEngine, only=("engines",), help={"engines": "engines (replicas) in the pool"}),
    opt.Part("objectives", Objectives, only=("slo",)),
    opt.Part("workload", Workload, only=("seed",)),
    opt.Part("scale", Scale),
)


@app.command()
@opt.built_from(*PREDICT_PARTS)
def predict(
    given: Given,
    out: Annotated[Path, typer.Option(help="run directory to write", parser=opt.out_path)] = Path("runs/predict"),
) -> None:
    """The simulator's answer for an engine configuration under a load, in the tables of a live run; with
    --workers / --cluster the simulation runs as a dask task."""
    from infermeter.engine.config import load_engine_config
    from infermeter.metrics.goodput import parse_slo
    from infermeter.python_api.preflight import refuse_existing_run
    from infermeter.sim.predict import apply_settings
    from infermeter.sim.prediction import Prediction, write_prediction

    load_given = given.get("load", {})
    if ("rate" in load_given) == ("concurrency" in load_given):
        raise UserError("give the load: --rate R (open loop, requests/s) or --concurrency C (closed loop), not both")
    predicted = PredictedEngine.from_options(given.get("predicted", {}))
    cfg = apply_settings(load_engine_config(predicted.engine), predicted.set_)
    source, load = simulated_load(given)
    engines = SimEngine.from_options(given.get("engine", {})).engines
    slo = Objectives.from_options(given.get("objectives", {})).slo
    assert load.requests is not None, "predict's --requests has a default"
    reqs, declaration = source.build(load.requests)
    bounds = parse_slo(slo) if slo else None
    refuse_existing_run(out)
    prediction = Prediction(reqs, cfg, engines, source.seed, load.concurrency)
    outcomes = _simulated(prediction, Scale.from_options(given.get("scale", {})))
    summary, intervals = write_prediction(outcomes, out, declaration, prediction, bounds)
    _print_prediction(summary, out, cfg, outcomes[0], intervals, predicted.set_)


def _simulated(prediction: Prediction, scale: Scale) -> list[SimOutcome]:
    """The prediction's simulations on dask (--workers / --cluster), or here with a progress bar."""
    from rich.progress import Progress

    what = f"predicting {prediction.engine.scheduler.name} x {prediction.engines}"
    if scale.distributed:
        from infermeter.distributed.tasks import task_map

        with task_map(scale.workers, scale.cluster) as tasks, err.status(f"{what} on dask"):
            return prediction.simulate_on(tasks)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(what, total=len(prediction.requests) * len(prediction.tasks()))
        return prediction.simulate(lambda done: bar.update(task, completed=done))


def _print_prediction(
    summary: Summary,
    out: Path,
    cfg: EngineConfig,
    outcome: SimOutcome,
    intervals: list[FigureInterval] | None,
    settings: list[str],
) -> None:
    """The tables of a live run, the figures' intervals, the calibration's warnings and the what-if settings."""
    from infermeter.records import read_run_info
    from infermeter.report.calibration import interval_table
    from infermeter.report.console import full_report, sim_table
    from infermeter.sim.predict import METRICS, FigureInterval, trust, unreliable

    cal = cfg.calibration
    caveat = unreliable(cal)
    if caveat is not None:
        print(f"warning: every figure below is {caveat}")
    print(full_report(summary, read_run_info(out)))
    print()
    print(sim_table(summary))
    if intervals is None and cal is not None:  # no band to carry: each figure alone, with what its calibration says
        intervals = [
            FigureInterval(metric=label, q=q, predicted=getattr(summary, field).percentile(q), low=None, high=None,
                           caveat=caveat)
            for label, field in METRICS.items()
            for q in (50, 99)
        ]  # fmt: skip
        print("\nno prediction interval: the calibration held no probe out of its fits (too few were measured)")
    if intervals is not None:
        print()
        print(interval_table(intervals, trust(cal) if cal is not None else None))
    if cal is not None:
        for line in cal.warnings:
            print(f"warning (calibration): {line}")
    if outcome.bins is not None:
        print(f"\n{outcome.bins.describe()}")
    if settings:
        print(f"\nwhat if: {', '.join(settings)}")
    print(f"\nrun directory: {out}")
