"""The wind tunnel on a virtual clock: `sim` and `sim-sweep`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err, refuse_existing_run
from infermeter.errors import UserError
from infermeter.metrics.goodput import parse_slo
from infermeter.records import (
    holds_run,
    read_run_info,
)
from infermeter.report.console import full_report, sim_table
from infermeter.report.tables import grid
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.traces import BURSTGPT_RATE, LEVELS

if TYPE_CHECKING:
    from infermeter.engine.multi_bin import BinEdges


def workload_requests(
    n: int,
    seed: int,
    workload: str | None,
    trace: Path | None,
    rps_scale: float,
    rate: float | None,
    arrival: str,
    burstiness: float,
):  # type: ignore[no-untyped-def]
    """Requests + declaration from the shared workload/arrival options of sim and sim-sweep."""
    spec = arrival_spec(arrival, rate, burstiness) if rate is not None else None
    return build_requests(
        n, seed, workload=None if trace else workload, arrivals=spec, trace=trace, rps_scale=rps_scale
    )


BinEdgesOption = Annotated[
    str | None,
    typer.Option(
        help="multi_bin_dynamic's edges and per-bin B_MAX: 'workload' (Algorithm 3 over the workload's predicted "
        "output lengths before the run, as the method computes them; the default) or 'online' (learned from the "
        "requests as they arrive, as a server must)",
        parser=opt.choice("workload", "online"),
    ),
]


def _engine_config(
    scheduler: str,
    bins: int | None,
    bin_key: str | None,
    latency: str | None,
    kv_tokens: int | None,
    prediction_noise: float,
    sla_token_ms: float,
    sla_request_s: float,
    config: Path | None,
    bin_edges: str | None = None,
):  # type: ignore[no-untyped-def]
    """The engine from --config with the command line's settings on top (a file's scheduler settings are kept
    when it names the same scheduler)."""
    from pydantic import ValidationError

    from infermeter.engine.config import EngineConfig, load_engine_config

    base = load_engine_config(config) if config else EngineConfig()
    chosen = base.scheduler.model_dump() if base.scheduler.name == scheduler else {"name": scheduler}
    given = (("--bins", "bins", bins), ("--bin-key", "bin_key", bin_key), ("--bin-edges", "bin_edges", bin_edges))
    for option, key, value in given:
        if value is None:
            continue
        if scheduler != "multi_bin_dynamic":
            raise UserError(f"{option} sets multi-bin dynamic batching's bins: add --scheduler multi_bin_dynamic")
        chosen[key] = value
    update: dict[str, object] = {
        "scheduler": chosen,
        "prediction_noise": prediction_noise,
        "d_sla_token": sla_token_ms / 1000,
        "d_sla_request": sla_request_s,
    }
    if latency is not None:
        update["latency"] = latency
    if kv_tokens is not None:
        update["kv_capacity_tokens"] = kv_tokens
    try:
        return EngineConfig.model_validate({**base.model_dump(), **update})
    except ValidationError as exc:  # the command line's settings against the file's (--bins 8 with 4 edges)
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "engine"
        origin = f"--config {config} with the command line's settings" if config else "the command line's settings"
        raise UserError(f"{origin}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


@app.command()
def sim(
    workload: opt.Workload = "synthetic-skewed",
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
    requests: opt.Requests = 1000,
    rate: opt.ArrivalRate = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    scheduler: opt.EngineScheduler = "continuous",
    engines: Annotated[int, typer.Option(help="engines (GPUs) in the pool", parser=opt.integer(1, 100_000))] = 1,
    bins: opt.Bins = None,
    bin_key: opt.BinKey = None,
    bin_edges: BinEdgesOption = None,
    latency: Annotated[
        str | None,
        typer.Option(
            help="batch (T(b, L) of multi-bin dynamic batching) or iteration; default per scheduler",
            parser=opt.choice("batch", "iteration"),
        ),
    ] = None,
    kv_tokens: Annotated[
        int | None,
        typer.Option(help="KV capacity per engine in tokens (overrides memory)", parser=opt.integer(16, 10**12)),
    ] = None,
    prediction_noise: Annotated[
        float, typer.Option(help="output-length predictor: lognormal sigma, 0 = oracle", parser=opt.number(0, 10))
    ] = 0.0,
    sla_token_ms: opt.SlaTokenMs = 10.0,
    sla_request_s: opt.SlaRequestS = 20.0,
    config: Annotated[
        Path | None,
        typer.Option(help="engine config YAML/JSON (any EngineConfig field)", parser=opt.ENGINE_CONFIG_FILE),
    ] = None,
    token_times: Annotated[
        str, typer.Option(help="auto, full or endpoints", parser=opt.choice("auto", "full", "endpoints"))
    ] = "auto",
    slo: opt.Slo = None,
    deadlines: opt.Deadlines = None,
    seed: opt.Seed = 42,
    out: Annotated[Path, typer.Option(help="run directory to write", parser=opt.out_path)] = Path("runs/sim"),
) -> None:
    """Simulate one engine configuration on a virtual clock and write a run directory."""
    from rich.progress import Progress

    from infermeter.sim.run import simulate_run

    reqs, declaration = workload_requests(requests, seed, workload, trace, rps_scale, rate, arrival, burstiness)
    cfg = _engine_config(
        scheduler, bins, bin_key, latency, kv_tokens, prediction_noise, sla_token_ms, sla_request_s, config, bin_edges
    )
    bounds = parse_slo(slo) if slo else None
    refuse_existing_run(out)
    used: list[BinEdges] = []
    with Progress(console=err, transient=True) as bar:  # records are written as the simulation goes
        task = bar.add_task(f"simulating {cfg.scheduler.name} x {engines}", total=len(reqs))
        summary = simulate_run(
            reqs,
            cfg,
            engines,
            seed,
            out,
            declaration,
            token_times,  # type: ignore[arg-type]
            slo=bounds,  # type: ignore[arg-type]
            deadlines=deadlines,
            progress=lambda done: bar.update(task, completed=done),
            bins=used,
        )
    info = read_run_info(out)
    print(full_report(summary, info))
    print()
    print(sim_table(summary))
    for b in used:
        print(f"\n{b.describe()}")
    print(f"\nrun directory: {out}")


SWEEP_REQUESTS = (1000, 10000, 100000, 1000000)  # list options: each may also be repeated (`opt.flat`)


SWEEP_GPUS = (1, 2, 4, 8, 16, 32, 64, 100)


SWEEP_BINS = (1, 2, 4, 8, 16, 32)


@app.command("sim-sweep")
def sim_sweep(
    out: Annotated[
        Path,
        typer.Option(help="directory for the results (a subdirectory per load level)", parser=opt.out_path),
    ] = Path("runs/sweep"),
    requests: Annotated[
        list[int], typer.Option(help="request counts, comma-separated", parser=opt.int_list(1, opt.MAX_REQUESTS))
    ] = SWEEP_REQUESTS,  # type: ignore[assignment]
    gpus: Annotated[
        list[int], typer.Option(help="GPU counts, comma-separated", parser=opt.int_list(1, 100_000))
    ] = SWEEP_GPUS,  # type: ignore[assignment]
    bins: Annotated[
        list[int], typer.Option(help="K values, comma-separated", parser=opt.int_list(1, 1024))
    ] = SWEEP_BINS,  # type: ignore[assignment]
    step: Annotated[
        str,
        typer.Option(
            help="1 (grid), 2 (method comparison), hypotheses (H1-H3 and the section 9.4 capacities on the smallest "
            "--requests), both (1 and 2) or all",
            parser=opt.choice("1", "2", "hypotheses", "both", "all"),
        ),
    ] = "all",
    levels: Annotated[
        str,
        typer.Option(
            help="load levels, comma-separated: high, medium, low (BurstGPT's 0.27 req/s, or a --trace's own "
            "arrivals, scaled 100x, 10x, 1x)",
            parser=opt.choice_list(*LEVELS),
        ),
    ] = ",".join(LEVELS),
    workload: Annotated[
        str, typer.Option(help="standard workload name or YAML/JSON file", parser=opt.WORKLOAD)
    ] = "synthetic-skewed",
    trace: opt.Trace = None,
    rps_scale: opt.SweepRpsScale = None,
    rate: Annotated[
        float | None,
        typer.Option(help="requests/s for a synthetic workload; replaces --levels with this one rate", parser=opt.RATE),
    ] = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    bin_key: opt.BinKey = None,
    sla_token_ms: opt.SlaTokenMs = 10.0,
    sla_request_s: opt.SlaRequestS = 20.0,
    seed: opt.Seed = 42,
    workers: opt.Workers = None,
    cluster: opt.Cluster = None,
) -> None:
    """Multi-bin dynamic batching's experiments at its load levels: the grid (requests x GPUs x bins K), the
    comparison of batching methods (resumable CSVs), and its hypotheses H1-H3 with their verdicts; every
    simulation a dask task with --workers / --cluster (the same CSVs, byte for byte)."""
    from rich.progress import Progress

    from infermeter.distributed.tasks import task_map
    from infermeter.sim.experiments import claim_sweep_dir

    counts, gpus, bins = opt.flat(requests), opt.flat(gpus), opt.flat(bins)
    if rate is not None and trace is not None:
        raise UserError("--rate sets a synthetic workload's arrivals; a --trace has its own: use --rps-scale")
    if rps_scale is not None and trace is None:
        raise UserError("--rps-scale compresses a --trace's arrival times: add --trace, or use --rate")
    single = rate if trace is None else rps_scale  # one level given by its rate or scaling, else the paper's levels
    scales = {"custom": 1.0} if single is not None else {name: LEVELS[name] for name in levels.split(",")}
    base = _engine_config("multi_bin_dynamic", 4, bin_key, None, None, 0.0, sla_token_ms, sla_request_s, None)
    cache: dict[tuple[int, float], object] = {}

    def arrivals(factor: float) -> tuple[float | None, float | None]:
        """A level's (trace compression, synthetic rate): its scaling of --rps-scale / --rate, or of BurstGPT's."""
        if trace is not None:
            return (single or 1.0) * factor, None
        return None, (single or BURSTGPT_RATE) * factor

    def make_at(n: int, factor: float):  # type: ignore[no-untyped-def]
        """n requests of the workload at a level's scaling."""
        if (n, factor) not in cache:
            scale, r = arrivals(factor)
            cache[(n, factor)] = workload_requests(n, seed, workload, trace, scale or 1.0, r, arrival, burstiness)[0]
        return cache[(n, factor)]

    make_at(max(counts), next(iter(scales.values())))  # a bad trace or workload is refused before anything is made
    if holds_run(out):
        raise UserError(f"--out {out} holds a single run, not a sweep: choose a new directory")
    settings = {
        "workload": None if trace else workload,
        "trace": str(trace) if trace else None,
        "arrival": arrival,
        "burstiness": burstiness,
        "seed": seed,
        "engine": base.model_dump(mode="json"),
    }
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file: choose a directory for the sweep")
    places = {name: out if len(scales) == 1 else out / name for name in scales}
    for name, factor in scales.items():  # every level's directory is claimed before anything runs
        scale, r = arrivals(factor)
        if step != "hypotheses":
            claim_sweep_dir(places[name], {**settings, "rps_scale": scale, "rate": r})
    with task_map(workers, cluster) as tasks, Progress(console=err) as bar:
        for name, factor in scales.items() if step != "hypotheses" else ():
            make = lambda n, f=factor: make_at(n, f)  # noqa: E731
            _sweep_level(places[name], name, step, counts, gpus, bins, base, make, seed, bar, tasks)
        if step in ("hypotheses", "all"):
            _hypotheses(out, scales, base, lambda f: make_at(min(counts), f), seed, bar, tasks)


def _sweep_level(out, level, step, counts, gpus, bins, base, make, seed, bar, tasks) -> None:  # type: ignore[no-untyped-def]
    """Steps 1 and 2 at one load level, resuming what `out` already holds; prints step 2's table."""
    from infermeter.sim.experiments import STEP1_CSV, STEP2_CSV, read_rows, run_experiments, step1_grid, step2_methods

    if step in ("1", "both", "all"):
        plan = step1_grid(counts, gpus, bins)
        task = bar.add_task(f"{level}: step 1, grid search", total=len(plan))
        run_experiments(plan, out / STEP1_CSV, base, make, seed, lambda e, skipped: bar.advance(task), tasks)
    if step in ("2", "both", "all"):
        methods = step2_methods(counts, read_rows(out / STEP1_CSV))
        task = bar.add_task(f"{level}: step 2, method comparison", total=len(methods))
        rows = run_experiments(methods, out / STEP2_CSV, base, make, seed, lambda e, skipped: bar.advance(task), tasks)
        header = ["experiment", "GPUs", "K", "req/s", "tok/s", "p99 latency", "token SLA viol.", "req SLA viol."]
        body = [
            [
                r["experiment"],
                r["num_gpus"],
                r["k_bins"],
                f"{float(r['throughput_req_s']):.3f}",
                f"{float(r['throughput_tok_s']):.1f}",
                f"{float(r['p99_latency_s']):.2f} s",
                f"{float(r['token_sla_violation_pct']):.1f}%",
                f"{float(r['request_sla_violation_pct']):.1f}%",
            ]
            for r in rows
        ]
        print(grid(header, body, f"Step 2: method comparison ({level} load)"))
    print(f"results: {out / STEP1_CSV}, {out / STEP2_CSV}")


def _hypotheses(out, scales, base, make, seed, bar, tasks) -> None:  # type: ignore[no-untyped-def]
    """H1-H3 at every level: hypotheses.json and hypotheses.md in `out`, and the verdicts printed."""
    from infermeter.report.hypotheses import console, markdown
    from infermeter.sim.hypotheses import HYPOTHESES_JSON, HYPOTHESES_MD, methods, run_hypotheses

    task = bar.add_task("hypotheses H1-H3", total=len(scales) + len(methods()))
    report = run_hypotheses(base, scales, make, seed, lambda what: bar.advance(task), tasks)
    out.mkdir(parents=True, exist_ok=True)
    (out / HYPOTHESES_JSON).write_text(report.model_dump_json(indent=2))
    (out / HYPOTHESES_MD).write_text(markdown(report))
    print(console(report))
    print(f"report: {out / HYPOTHESES_MD}, {out / HYPOTHESES_JSON}")
