"""`predict`: what a calibrated engine would do under a load, with "what if" overrides, on the virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err, refuse_existing_run
from infermeter.cli.sim import workload_requests
from infermeter.errors import UserError


@app.command()
def predict(
    engine: Annotated[
        Path,
        typer.Option(help="engine configuration (what `infermeter calibrate` wrote)", parser=opt.ENGINE_CONFIG_FILE),
    ],
    rate: opt.ArrivalRate = None,
    concurrency: Annotated[
        int | None, typer.Option(help="closed loop: requests in flight", parser=opt.integer(1, 100_000))
    ] = None,
    workload: opt.Workload = "conversation",
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
    requests: opt.Requests = 500,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    set_: Annotated[
        list[str],
        typer.Option(
            "--set",
            help="what if: an engine setting as key=value (max_num_seqs=128, scheduler=chunked_prefill, "
            "kv_capacity_tokens=200000, iteration_model.fixed=0.008; times in seconds); repeatable",
        ),
    ] = [],  # noqa: B006 - typer's way to declare a repeatable option
    engines: Annotated[int, typer.Option(help="engines (replicas) in the pool", parser=opt.integer(1, 100_000))] = 1,
    slo: opt.Slo = None,
    seed: opt.Seed = 42,
    out: Annotated[Path, typer.Option(help="run directory to write", parser=opt.out_path)] = Path("runs/predict"),
    workers: opt.Workers = None,
    cluster: opt.Cluster = None,
) -> None:
    """The simulator's answer for an engine configuration under a load, in the tables of a live run; with
    --workers / --cluster the simulation runs as a dask task."""
    from rich.progress import Progress

    from infermeter.engine.config import load_engine_config
    from infermeter.metrics.goodput import parse_slo
    from infermeter.records import read_run_info
    from infermeter.report.calibration import interval_table
    from infermeter.report.console import full_report, sim_table
    from infermeter.sim import SimTask, simulate, simulate_task, write_sim_run
    from infermeter.sim.predict import apply_settings, bound_engines, figure_intervals, save_intervals
    from infermeter.sim.run import outcome_summary

    if (rate is None) == (concurrency is None):
        raise UserError("give the load: --rate R (open loop, requests/s) or --concurrency C (closed loop), not both")
    cfg = apply_settings(load_engine_config(engine), set_)
    reqs, declaration = workload_requests(requests, seed, workload, trace, rps_scale, rate, arrival, burstiness)
    bounds = parse_slo(slo) if slo else None
    refuse_existing_run(out)
    ends = bound_engines(cfg)
    band = [SimTask(reqs, engine, engines, seed, concurrency) for engine in ends or ()]
    if workers is not None or cluster is not None:
        from infermeter.distributed.tasks import task_map

        with task_map(workers, cluster) as tasks, err.status(f"predicting {cfg.scheduler.name} x {engines} on dask"):
            outcome, *banded = tasks(simulate_task, [SimTask(reqs, cfg, engines, seed, concurrency), *band])
    else:
        with Progress(console=err, transient=True) as bar:
            task = bar.add_task(f"predicting {cfg.scheduler.name} x {engines}", total=len(reqs) * (1 + len(band)))
            outcome = simulate(
                reqs,
                cfg,
                engines,
                seed,
                progress=lambda done: bar.update(task, completed=done),
                concurrency=concurrency,
            )
            banded = []
            for k, t in enumerate(band, start=1):
                banded.append(
                    simulate(
                        reqs, t.config, engines, seed, concurrency=concurrency,
                        progress=lambda done, k=k: bar.update(task, completed=k * len(reqs) + done),  # type: ignore[misc]
                    )
                )  # fmt: skip
    summary = write_sim_run(outcome, out, declaration, seed, slo=bounds, concurrency=concurrency)  # type: ignore[arg-type]
    print(full_report(summary, read_run_info(out)))
    print()
    print(sim_table(summary))
    if banded:
        low, high = (outcome_summary(o, declaration, seed, concurrency) for o in banded)  # type: ignore[arg-type]
        intervals = figure_intervals(summary, low, high)
        save_intervals(out, intervals)
        print()
        print(interval_table(intervals))
    elif cfg.calibration is not None:
        print("\nno prediction interval: the calibration held no probe out of its fits (too few were measured)")
    if cfg.calibration is not None:
        for line in cfg.calibration.warnings:
            print(f"warning (calibration): {line}")
    if outcome.bins is not None:
        print(f"\n{outcome.bins.describe()}")
    if set_:
        print(f"\nwhat if: {', '.join(set_)}")
    print(f"\nrun directory: {out}")
