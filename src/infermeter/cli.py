"""The `infermeter` command: one entry point, a subcommand per job."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import orjson
import typer
from rich.console import Console

from infermeter import cli_options as opt
from infermeter import secrets
from infermeter.errors import ExitCode, Stopped, UserError
from infermeter.metrics import RecordColumns, Summary, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.goodput import parse_slo
from infermeter.metrics.summary_model import parse_summary
from infermeter.records import (
    JOURNAL,
    LEDGER,
    NOT_RECORDED,
    RECORDS,
    RUN_JSON,
    SUMMARY,
    RunInfo,
    holds_run,
    is_sealed,
    read_records,
    read_run_info,
)
from infermeter.report.console import comparison_table, full_report, sim_table
from infermeter.report.tables import grid
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.export import FORMATS, write_requests

REQUESTS = opt.integer(1, opt.MAX_REQUESTS)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Benchmark LLM inference servers: exact latency metrics, user-experience scores, an engine wind tunnel.",
)
err = Console(stderr=True)


@app.command()
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="one run directory, or several to compare side by side")],
    json: Annotated[bool, typer.Option("--json", help="print summary.json instead of tables")] = False,
    itl_option: Annotated[
        str | None,
        typer.Option(
            "--itl-option", help="A, B or C; default: the one run.json declares", parser=opt.choice("A", "B", "C")
        ),
    ] = None,
    slo: opt.Slo = None,
    deadlines: opt.Deadlines = None,
) -> None:
    """Recompute and print the summary of any run directory (live, emulated or simulated)."""
    results: list[tuple[Path, RunInfo, Summary]] = []
    for run_dir in run_dirs:
        with _about("run_dirs"):
            info = read_run_info(run_dir)
            cols = RecordColumns.from_table(read_records(run_dir))
            stored = _stored_summary(run_dir)
        option = itl_option or info.itl_option
        bounds = parse_slo(slo) if slo is not None else dict(info.slo)
        spec = deadlines if deadlines is not None else info.deadlines
        summary = summarize(cols, option, bounds, parse_deadlines(spec) if spec else None)  # type: ignore[arg-type]
        _stored_blocks(summary, stored, info)
        if not is_sealed(run_dir):
            lost = int(sum(e.startswith(NOT_RECORDED) for e in cols.error.tolist()))
            info.notes.append(
                f"this run never closed (its process was killed or its disk filled): {cols.n} requests read from "
                f"its journal, {lost} of them sent with no outcome recorded"
            )
        results.append((run_dir, info, summary))
    if json:
        payload: Any = (
            results[0][2].model_dump(mode="json")
            if len(results) == 1
            else {str(d): s.model_dump(mode="json") for d, _, s in results}
        )
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    if len(results) > 1:
        print(comparison_table([(d.name or str(d), s) for d, _, s in results]))
        return
    _, info, summary = results[0]
    print(full_report(summary, info))
    if summary.sim is not None:
        print()
        print(sim_table(summary))


def _stored_summary(run_dir: Path) -> Summary | None:
    """The run's summary.json as written (any version), or None when the run left none; a damaged one is a
    one-line error."""
    path = run_dir / SUMMARY
    if not path.is_file():
        return None
    try:
        return parse_summary(orjson.loads(path.read_bytes()), str(path))
    except orjson.JSONDecodeError as exc:
        raise UserError(f"{path} is not a valid summary: {exc}") from None
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror})") from None


def _stored_blocks(summary: Summary, stored: Summary | None, info: RunInfo) -> None:
    """Blocks the records alone cannot give back, taken from summary.json: the simulator's `sim` block, the
    server's metrics and energy, and ITL (with its source) when only the endpoints of each stream were recorded."""
    if stored is None:
        return
    if stored.sim is not None:
        summary.sim = stored.sim
    if stored.server_metrics is not None:
        summary.server_metrics = stored.server_metrics
    if stored.energy is not None:
        summary.energy = stored.energy
    if info.token_times == "endpoints":
        summary.itl_ms, summary.jitter_ms, summary.max_pause_ms = stored.itl_ms, stored.jitter_ms, stored.max_pause_ms
        summary.fluidity = stored.fluidity
        if stored.itl_source is not None:
            summary.itl_source = stored.itl_source
        if stored.fluidity_note is not None:
            summary.fluidity_note = stored.fluidity_note


@app.command()
def workload(
    name: Annotated[
        str, typer.Argument(help="standard workload name or a YAML/JSON workload file", parser=opt._spec(opt._workload))
    ],
    requests: Annotated[
        int, typer.Option("--requests", "-n", help="how many requests to draw", parser=REQUESTS)
    ] = 1000,
    seed: opt.Seed = 42,
    out: Annotated[
        Path, typer.Option(help="output file: .csv, .jsonl or .json (with the declaration)", parser=opt.out_path)
    ] = Path("workload.csv"),
    rate: opt.ArrivalRate = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
) -> None:
    """Write a workload's requests (lengths, classes, prefixes, arrival offsets) to inspect them."""
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file ending in .csv, .jsonl or .json")
    if out.suffix not in FORMATS:
        raise UserError(f"--out {out}: use a file ending in {', '.join(FORMATS)}")
    _refuse_run_file(out)
    spec = arrival_spec(arrival, rate, burstiness) if rate is not None else None
    reqs, declaration = build_requests(
        requests, seed, workload=None if trace else name, arrivals=spec, trace=trace, rps_scale=rps_scale
    )
    write_requests(reqs, out, declaration)
    rows = []
    for label, values in (("input tokens", reqs.input_tokens), ("output tokens", reqs.output_tokens)):
        rows.append(
            [
                label,
                f"{values.mean():.1f}",
                f"{np.median(values):.0f}",
                f"{np.percentile(values, 95):.0f}",
                f"{values.min()}",
                f"{values.max()}",
            ]
        )
    print(
        grid(
            ["", "mean", "median", "p95", "min", "max"],
            rows,
            f"{declaration['name']}: {len(reqs)} requests, seed {seed}",
        )
    )
    if declaration["arrivals"]:
        print(f"arrivals: {declaration['arrivals']['description']}, last at {reqs.arrival_s[-1]:.3f} s")
    for note in declaration.get("notes", []):
        print(f"note: {note}")
    print(f"wrote {out}")


def _workload_requests(
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
):  # type: ignore[no-untyped-def]
    """The engine from --config with the command line's settings on top (a file's scheduler settings are kept
    when it names the same scheduler)."""
    from infermeter.engine.config import EngineConfig, load_engine_config

    base = load_engine_config(config) if config else EngineConfig()
    chosen = base.scheduler.model_dump() if base.scheduler.name == scheduler else {"name": scheduler}
    for option, key, value in (("--bins", "bins", bins), ("--bin-key", "bin_key", bin_key)):
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
    return EngineConfig.model_validate({**base.model_dump(), **update})


@app.command()
def sim(
    workload: Annotated[
        str, typer.Option(help="standard workload name or YAML/JSON file", parser=opt._spec(opt._workload))
    ] = "synthetic-skewed",
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
    requests: Annotated[int, typer.Option("--requests", "-n", parser=REQUESTS)] = 1000,
    rate: opt.ArrivalRate = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    scheduler: opt.EngineScheduler = "continuous",
    engines: Annotated[int, typer.Option(help="engines (GPUs) in the pool", parser=opt.integer(1, 100_000))] = 1,
    bins: opt.Bins = None,
    bin_key: opt.BinKey = None,
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
        typer.Option(
            help="engine config YAML/JSON (any EngineConfig field)", parser=opt.config_file(opt._engine_config)
        ),
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

    from infermeter.sim import simulate, write_sim_run

    reqs, declaration = _workload_requests(requests, seed, workload, trace, rps_scale, rate, arrival, burstiness)
    cfg = _engine_config(
        scheduler, bins, bin_key, latency, kv_tokens, prediction_noise, sla_token_ms, sla_request_s, config
    )
    bounds = parse_slo(slo) if slo else None
    _refuse_existing_run(out)
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"simulating {cfg.scheduler.name} x {engines}", total=len(reqs))
        outcome = simulate(reqs, cfg, engines, seed, progress=lambda done: bar.update(task, completed=done))
    summary = write_sim_run(
        outcome,
        out,
        declaration,
        seed,
        token_times,
        slo=bounds,  # type: ignore[arg-type]
        deadlines=deadlines,
    )
    info = read_run_info(out)
    print(full_report(summary, info))
    print()
    print(sim_table(summary))
    print(f"\nrun directory: {out}")


def _emulator_config(path: Path | None, scheduler: str | None):  # type: ignore[no-untyped-def]
    """The emulator's configuration from --config / --emulator-config, with --scheduler applied."""
    from infermeter.emulator.config import EmulatorConfig, load_emulator_config

    emu = load_emulator_config(path) if path else EmulatorConfig()
    if scheduler is not None:
        emu.engine = emu.engine.model_validate({**emu.engine.model_dump(), "scheduler": scheduler})
    return emu


def _refuse_existing_run(out: Path) -> None:
    """Commands that write one run directory never write over another run."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file: give a directory for the run")
    if holds_run(out):
        raise UserError(f"--out {out} already holds a run: choose a new directory or remove that one")


def _refuse_run_file(out: Path) -> None:
    """Commands that write one file never write over a file of a run directory."""
    if out.name in (RUN_JSON, RECORDS, JOURNAL, LEDGER, SUMMARY) and holds_run(out.parent):
        raise UserError(f"--out {out} is a file of the run in {out.parent}: choose another file")


@contextlib.contextmanager
def _about(param: str) -> Iterator[None]:
    """A UserError raised in the block becomes a usage error naming the parameter, as click names a bad value."""
    try:
        yield
    except UserError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"'{param}'") from None


SWEEP_REQUESTS = (1000, 10000, 100000, 1000000)  # list options: each may also be repeated (`opt.flat`)
SWEEP_GPUS = (1, 2, 4, 8, 16, 32, 64, 100)
SWEEP_BINS = (1, 2, 4, 8, 16, 32)


@app.command("sim-sweep")
def sim_sweep(
    out: Annotated[
        Path,
        typer.Option(help="directory for step1_grid_search.csv and step2_comparison.csv", parser=opt.out_path),
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
    step: Annotated[str, typer.Option(help="1, 2 or both", parser=opt.choice("1", "2", "both"))] = "both",
    workload: Annotated[
        str, typer.Option(help="standard workload name or YAML/JSON file", parser=opt._spec(opt._workload))
    ] = "synthetic-skewed",
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 10.0,
    rate: Annotated[float, typer.Option(help="requests/s for synthetic workloads", parser=opt.RATE)] = 27.0,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    bin_key: opt.BinKey = "total",
    sla_token_ms: opt.SlaTokenMs = 10.0,
    sla_request_s: opt.SlaRequestS = 20.0,
    seed: opt.Seed = 42,
) -> None:
    """The seed's step 1 grid (requests x GPUs x K) and step 2 method comparison, resumable, as CSVs."""
    from rich.progress import Progress

    from infermeter.sim.experiments import (
        STEP1_CSV,
        STEP2_CSV,
        claim_sweep_dir,
        run_experiments,
        step1_grid,
        step2_methods,
    )

    counts, gpus, bins = opt.flat(requests), opt.flat(gpus), opt.flat(bins)
    base = _engine_config("multi_bin_dynamic", 4, bin_key, None, None, 0.0, sla_token_ms, sla_request_s, None)
    settings = {
        "workload": None if trace else workload,
        "trace": str(trace) if trace else None,
        "rps_scale": rps_scale,
        "rate": None if trace else rate,
        "arrival": arrival,
        "burstiness": burstiness,
        "seed": seed,
        "engine": base.model_dump(mode="json"),
    }
    cache: dict[int, object] = {}

    def make(n: int):  # type: ignore[no-untyped-def]
        if n not in cache:
            cache[n] = _workload_requests(
                n, seed, workload, trace, rps_scale, None if trace else rate, arrival, burstiness
            )[0]
        return cache[n]

    make(max(counts))  # a bad trace or workload is refused before the sweep directory is made
    if holds_run(out):
        raise UserError(f"--out {out} holds a single run, not a sweep: choose a new directory")
    claim_sweep_dir(out, settings)

    with Progress(console=err) as bar:
        if step in ("1", "both"):
            plan = step1_grid(counts, gpus, bins)
            task = bar.add_task("step 1: grid search", total=len(plan))
            run_experiments(plan, out / STEP1_CSV, base, make, seed, lambda e, skipped: bar.advance(task))
        if step in ("2", "both"):
            from infermeter.sim.experiments import read_rows

            methods = step2_methods(counts, read_rows(out / STEP1_CSV))
            task = bar.add_task("step 2: method comparison", total=len(methods))
            rows = run_experiments(methods, out / STEP2_CSV, base, make, seed, lambda e, skipped: bar.advance(task))
            header = ["experiment", "GPUs", "K", "req/s", "tok/s", "p99 latency", "token SLA viol.", "req SLA viol."]
            print(
                grid(
                    header,
                    [
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
                    ],
                    "Step 2: method comparison",
                )
            )
    print(f"results: {out / STEP1_CSV}, {out / STEP2_CSV}")


@app.command()
def calibrate(
    grid_csv: Annotated[
        Path,
        typer.Argument(
            help="latency grid CSV (batch_size, max_seq_len, mean_latency_sec, ...)", parser=opt.existing_file
        ),
    ],
) -> None:
    """Fit the seed's batch latency model T(b, L) = alpha + beta * L * h(b) to a measured grid."""
    from infermeter.engine.calibration import fit_grid_file

    with _about("grid_csv"):
        fit = fit_grid_file(grid_csv)
    m = fit.model
    print(
        grid(
            ["Parameter", "Value"],
            [
                ["alpha", f"{m.alpha * 1000:.3f} ms"],
                ["beta", f"{m.beta * 1000:.4f} ms/token"],
                ["gamma", f"{m.gamma:.4f}"],
                ["R^2", f"{fit.r2:.4f}"],
                ["rows", str(fit.rows)],
                ["max |error|", f"{fit.max_abs_error_s * 1000:.2f} ms"],
            ],
            "Calibrated batch latency model",
        )
    )


def _run_async(coro):  # type: ignore[no-untyped-def]
    """Run a coroutine on uvloop when available (3-5x the SSE events/s of the default loop)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on POSIX
        import asyncio

        return asyncio.run(coro)
    return uvloop.run(coro)


@app.command()
def run(
    url: Annotated[
        str | None,
        typer.Option(help="server base URL; without it the embedded emulator is benchmarked", parser=opt.url),
    ] = None,
    api: opt.Api = "completions",
    backend: opt.BackendName = "openai",
    model: opt.Model = None,
    workload: opt.Workload = None,
    input_tokens: opt.InputTokens = None,
    output_tokens: opt.OutputTokens = None,
    trace: opt.Trace = None,
    rps_scale: opt.RpsScale = 1.0,
    requests: Annotated[
        int | None, typer.Option("--requests", "-n", help="requests to measure", parser=REQUESTS)
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(help="stop sending after this many seconds", parser=opt.number(0, opt.MAX_SECONDS, True)),
    ] = None,
    rate: opt.Rate = None,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    concurrency: Annotated[
        int | None, typer.Option(help="closed loop: requests kept in flight", parser=opt.integer(1, 100_000))
    ] = None,
    barrier: Annotated[bool, typer.Option(help="closed loop: release the first C requests together")] = False,
    warmup: opt.Warmup = "auto",  # type: ignore[assignment]
    seed: opt.Seed = 42,
    slo: opt.Slo = None,
    deadlines: opt.Deadlines = None,
    tokenizer: opt.Tokenizer = None,
    ignore_eos: Annotated[
        bool,
        typer.Option(
            help="ask the server to run every reply to max_tokens (vLLM, llama.cpp; hosted APIs may reject it)"
        ),
    ] = True,
    extra_body: Annotated[
        dict[str, Any] | None,
        typer.Option(
            help='JSON merged into every request body, e.g. \'{"logit_bias": {"2": -100}}\'', parser=opt.extra_body
        ),
    ] = None,
    api_key_env: opt.ApiKeyEnv = "OPENAI_API_KEY",
    scrape_interval: Annotated[
        float, typer.Option(help="seconds between server /metrics scrapes (0: off)", parser=INTERVAL)
    ] = 1.0,
    telemetry_interval: Annotated[
        float, typer.Option(help="seconds between host telemetry samples (0: off)", parser=INTERVAL)
    ] = 1.0,
    gpu_price: Annotated[
        float | None, typer.Option(help="price per GPU-hour, for cost per million tokens", parser=opt.number(0, 1e6))
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(help="GPUs serving (cost denominator; default: NVML count)", parser=opt.integer(1, 100_000)),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/run-YYYYmmdd-HHMMSS)", parser=opt.out_path)
    ] = None,
    timeout: Annotated[float, typer.Option(help="total seconds allowed per request", parser=TIMEOUT)] = 900.0,
    first_token_timeout: Annotated[
        float, typer.Option(help="seconds allowed until the first token", parser=TIMEOUT)
    ] = 120.0,
    emulator_config: opt.EmulatorConfigFile = None,
    scheduler: opt.Scheduler = None,
    progress: opt.Progress = True,
) -> None:
    """Benchmark a server, or the embedded emulator when no --url is given; ends with the minimum report."""
    from infermeter.load.options import RunOptions
    from infermeter.load.run import benchmark
    from infermeter.report.console import minimum_report

    if rate is not None and concurrency is not None:
        raise UserError("give either --rate (open loop) or --concurrency (closed loop), not both")
    if trace is not None and (workload is not None or input_tokens is not None or output_tokens is not None):
        raise UserError("--trace gives the lengths: drop --workload, --input-tokens and --output-tokens")
    replay = trace is not None and rate is None and concurrency is None  # the trace's own arrival times
    if url is None and rate is None and concurrency is None and not replay:
        rate = 20.0  # the demo: the emulator at a moderate open-loop load
    if url is not None and rate is None and concurrency is None and not replay:
        raise UserError("give a load: --rate R (open loop), --concurrency C (closed loop) or --trace FILE (replay)")
    if url is not None and (emulator_config is not None or scheduler is not None):
        raise UserError("--emulator-config and --scheduler configure the embedded emulator: drop them with --url")
    if first_token_timeout > timeout:
        raise UserError(f"--first-token-timeout ({first_token_timeout:g} s) must not exceed --timeout ({timeout:g} s)")
    _api_key(api_key_env)
    if workload is None and input_tokens is None and output_tokens is None and trace is None:
        workload = "synthetic-uniform"
    if requests is None and duration is None:
        requests = _trace_length(trace) if trace is not None else 300 if url is None else 1000
    arrivals = arrival_spec(arrival, rate, burstiness) if rate is not None else None
    # checks the workload options before anything starts (a trace: that it holds the requests asked for)
    checked = requests if trace is not None and requests is not None else 1
    build_requests(checked, seed, workload, input_tokens, output_tokens, trace=trace, rps_scale=rps_scale)
    run_dir = out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    _refuse_existing_run(run_dir)
    emu = None if url is not None else _emulator_config(emulator_config, scheduler)
    run_opts = RunOptions(
        url=url or "",
        out=run_dir,
        api=api,  # type: ignore[arg-type]
        backend=backend,
        model=model or "",
        api_key_env=api_key_env,
        workload=workload,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        trace=trace,
        rps_scale=rps_scale,
        requests=requests,
        duration=duration,
        arrivals=arrivals,
        concurrency=concurrency,
        barrier=barrier,
        warmup=warmup,
        seed=seed,
        slo=parse_slo(slo) if slo else {},
        first_token_timeout=first_token_timeout,
        total_timeout=timeout,
        progress=progress,
        deadlines=deadlines,
        tokenizer=tokenizer,
        scrape_interval=scrape_interval,
        telemetry_interval=telemetry_interval,
        gpu_price_per_hour=gpu_price,
        gpus=gpus,
        extra_body=extra_body or {},
        ignore_eos=ignore_eos,
    )
    with _target(url, emu, backend) as (target_url, sut, metrics_url):
        run_opts.url, run_opts.sut, run_opts.metrics_url = target_url, sut, metrics_url
        result = _run_async(benchmark(run_opts))
    print(minimum_report(result.summary, read_run_info(result.run_dir)))
    print(f"\nrun directory: {result.run_dir}  (full tables: infermeter report {result.run_dir})")
    _finish_run(result)


INTERVAL = opt.number(0, 3600, what="a number of seconds (0 turns it off)")
TIMEOUT = opt.number(0, opt.MAX_SECONDS, lo_open=True, what="a number of seconds")


def _api_key(env: str) -> None:
    """Register the key for redaction before anything can print it; a named variable must be set."""
    key = os.environ.get(env)
    if env != "OPENAI_API_KEY" and not key:
        raise UserError(f"--api-key-env {env}: the environment variable {env} is not set")
    secrets.register(key)


def _finish_run(result) -> None:  # type: ignore[no-untyped-def]
    """Exit with the code that says how the run ended (README, "Exit codes")."""
    if result.disk_failure is not None:
        raise Stopped(
            f"{result.disk_failure}: the run stopped early; what was recorded is in {result.run_dir} "
            f"(infermeter report {result.run_dir} reads it)",
            ExitCode.INCOMPLETE,
        )
    if result.stopped == "interrupted":
        raise Stopped(f"interrupted: what was measured is in {result.run_dir}", ExitCode.INTERRUPTED)
    if result.stopped == "terminated":
        raise Stopped(f"terminated (SIGTERM): what was measured is in {result.run_dir}", ExitCode.TERMINATED)
    r = result.summary.requests
    if r.total and not r.ok:
        top = next(iter(r.failures_by_reason), "unknown")
        raise Stopped(
            f"no request succeeded: {r.failed} of {r.total} failed (most often: {top}); "
            f"see infermeter report {result.run_dir}",
            ExitCode.NO_SUCCESS,
        )


def _trace_length(trace: Path) -> int:
    """How many usable requests a trace holds (its whole length is replayed unless --requests says otherwise)."""
    from infermeter.workload.traces import load_burstgpt

    try:
        return len(load_burstgpt(trace))
    except UserError as exc:
        raise UserError(f"--trace {exc}") from None


@contextlib.contextmanager
def _target(url: str | None, emu: Any, backend: str = "openai"):  # type: ignore[no-untyped-def]
    """Yield (target, SUT declaration, HTTP base URL for /metrics): the given server, or the embedded emulator
    started for the block (with its gRPC front end as the target for --backend grpc)."""
    if url is not None:
        yield url, {}, url
        return
    from infermeter.emulator.process import emulator_process

    if backend == "grpc":
        emu = emu.model_copy(update={"grpc_port": 0})

    engine = emu.engine
    sut = {
        "emulated": True,
        "hardware": f"emulated engine ({engine.latency_model().name} latency model, KV {engine.capacity()} tokens)",
        "software": f"infermeter emulator, scheduler {engine.scheduler.name}, speed x{emu.speed:g}",
        "boundary": "Model Engine",
        "prefix_caching": "enabled" if emu.prefix_caching else "disabled",
        "guardrails": f"input filter {emu.input_filter_ms:g} ms, output filter {emu.output_filter_ms:g} ms"
        if emu.input_filter_ms or emu.output_filter_ms
        else "none",
    }
    if emu.faults:
        sut["faults"] = [f.model_dump(exclude_defaults=True) for f in emu.faults]
    err.print("starting the embedded emulator (no --url given)")
    with emulator_process(emu, pin_cpus=True) as process:
        target = process.grpc_target if backend == "grpc" and process.grpc_target else process.url
        yield target, {**sut, "model": emu.model}, process.url


@app.command()
def prompt(
    tokenizer: Annotated[
        str,
        typer.Option(
            help="cl100k_base, o200k_base, a tokenizer.json or a .gguf file", parser=opt._spec(opt._tokenizer)
        ),
    ],
    tokens: Annotated[int, typer.Option(help="exact token count of the prompt", parser=opt.integer(1, 1_000_000))],
    chat: Annotated[bool, typer.Option(help="count after the tokenizer's chat template")] = False,
    json: Annotated[bool, typer.Option("--json", help='print {"prompt", "tokens", "tokenizer"}')] = False,
    seed: opt.Seed = 0,
) -> None:
    """Build one prompt of exactly N tokens (after the chat template with --chat) and print it."""
    from infermeter.workload.prompts import ExactPrompter
    from infermeter.workload.tokenizers import resolve_tokenizer

    tok = resolve_tokenizer(tokenizer)
    prompter = ExactPrompter(tok, chat=chat, seed=seed)
    content = prompter.build(tokens)
    counted = prompter.count(content)
    if json:
        sys.stdout.write(
            orjson.dumps(
                {
                    "prompt": content,
                    "tokens": counted,
                    "tokenizer": tok.name,
                    "rendered": prompter.render(content) if chat else None,
                }
            ).decode()
            + "\n"
        )
    else:
        print(content)
        err.print(
            f"{counted} tokens under {tok.name}"
            + (f" after the chat template ({prompter.overhead} of them the template's)" if chat else "")
        )


@app.command("profile-prefill")
def profile_prefill_cmd(
    url: opt.Url = None,
    api: opt.Api = "completions",
    backend: opt.BackendName = "openai",
    model: opt.Model = None,
    api_key_env: opt.ApiKeyEnv = "OPENAI_API_KEY",
    lengths: Annotated[
        list[int],
        typer.Option(help="prompt lengths to profile, comma-separated", parser=opt.int_list(1, opt.MAX_LENGTH)),
    ] = (128, 256, 512, 1024, 2048, 4096, 8192),  # type: ignore[assignment]
    repeats: Annotated[
        int, typer.Option(help="requests per length (the minimum TTFT is kept)", parser=opt.integer(1, 100))
    ] = 3,
    decode_tokens: Annotated[int, typer.Option(help="output tokens per request", parser=opt.integer(1, 10_000))] = 4,
    out: Annotated[Path, typer.Option(help="where to save the fitted curve (JSON)", parser=opt.out_path)] = Path(
        "prefill_curve.json"
    ),
    emulator_config: opt.EmulatorConfigFile = None,
) -> None:
    """Fit TTFT against prompt length from isolated requests; use it as --deadlines ttft=@FILE,slack=..."""
    from infermeter.client.openai_sse import ClientConfig
    from infermeter.load.warmup import discover_model
    from infermeter.suites.prefill import profile_prefill

    lengths = opt.flat(lengths)
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file name for the curve, e.g. prefill_curve.json")
    _refuse_run_file(out)
    if len(set(lengths)) < 3:
        raise UserError(f"--lengths needs at least three different lengths to fit a curve, got {len(set(lengths))}")
    _api_key(api_key_env)
    emu = None if url is not None else _emulator_config(emulator_config, None)
    rows: list[list[str]] = []

    def on_point(length: int, ttft: float | None) -> None:
        err.print(f"  {length:>7} tokens: min TTFT {'failed' if ttft is None else f'{ttft * 1000:.2f} ms'}")

    with _target(url, emu, backend) as (target_url, _, _):
        cfg = ClientConfig(target_url, api, model or "", api_key_env=api_key_env)  # type: ignore[arg-type]
        cfg.model = cfg.model or _run_async(discover_model(cfg))
        curve = _run_async(profile_prefill(cfg, lengths, repeats, decode_tokens, on_point, backend))
    try:
        curve.save(out)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot write the curve ({exc.strerror})") from None
    for length, ttft in zip(curve.lengths, curve.min_ttft_s, strict=True):
        rows.append([str(length), f"{ttft * 1000:.2f}", f"{float(curve.predict(length)) * 1000:.2f}"])
    print(
        grid(
            ["Prompt tokens", "Min TTFT (ms)", "Fitted (ms)"],
            rows,
            f"Prefill curve: {curve.a * 1000:.3f} + {curve.b * 1000:.5f} P + {curve.c * 1000:.3g} P^2 ms, "
            f"R^2 {curve.r2:.4f}",
        )
    )
    print(f"saved {out}: use --deadlines ttft=@{out},slack=50ms,tbt=25ms")


@app.command()
def capacity(
    slo: opt.CapacitySlo,
    url: opt.Url = None,
    api: opt.Api = "completions",
    backend: opt.BackendName = "openai",
    model: opt.Model = None,
    api_key_env: opt.ApiKeyEnv = "OPENAI_API_KEY",
    workload: opt.Workload = None,
    input_tokens: opt.InputTokens = None,
    output_tokens: opt.OutputTokens = None,
    requests: Annotated[int, typer.Option("--requests", "-n", help="requests per probe", parser=REQUESTS)] = 300,
    arrival: opt.Arrival = "poisson",
    burstiness: opt.Burstiness = 1.0,
    start_rate: Annotated[float, typer.Option(help="first offered rate, req/s", parser=opt.RATE)] = 1.0,
    max_rate: Annotated[float, typer.Option(help="never probe above this rate", parser=opt.RATE)] = 1000.0,
    tolerance: Annotated[
        float,
        typer.Option(help="stop when (fail - pass) / fail is below this", parser=opt.number(0, 1, lo_open=True)),
    ] = 0.05,
    max_probes: Annotated[int, typer.Option(help="at most this many probes", parser=opt.integer(1, 100))] = 12,
    min_success: Annotated[
        float, typer.Option(help="a probe also needs this share of requests to succeed", parser=opt.number(0, 1))
    ] = 0.99,
    warmup: Annotated[int, typer.Option(help="auto, N requests, or off (per probe)", parser=opt.warmup)] = (
        "auto"  # type: ignore[assignment]
    ),
    seed: opt.Seed = 42,
    out: Annotated[Path, typer.Option(help="directory for the probes and capacity.json", parser=opt.out_path)] = Path(
        "runs/capacity"
    ),
    emulator_config: opt.EmulatorConfigFile = None,
    scheduler: opt.Scheduler = None,
    progress: Annotated[bool, typer.Option(help="show live progress of each probe")] = True,
) -> None:
    """Search the highest request rate that meets every SLO; each probe is a full run, kept for resuming."""
    from infermeter.load.options import RunOptions
    from infermeter.load.run import benchmark
    from infermeter.suites.capacity import claim_search_dir, search
    from infermeter.suites.slo import parse_capacity_slo

    slos = [parse_capacity_slo(s) for s in slo]
    if max_rate < start_rate:
        raise UserError(f"--max-rate ({max_rate:g}) is below --start-rate ({start_rate:g})")
    if url is not None and (emulator_config is not None or scheduler is not None):
        raise UserError("--emulator-config and --scheduler configure the embedded emulator: drop them with --url")
    _api_key(api_key_env)
    if workload is None and input_tokens is None and output_tokens is None:
        workload = "synthetic-uniform"
    build_requests(1, seed, workload=workload, input_tokens=input_tokens, output_tokens=output_tokens)  # checks them
    arrival_spec(arrival, start_rate, burstiness)
    emu = None if url is not None else _emulator_config(emulator_config, scheduler)
    settings = {
        "target": url or (emu.model_dump(mode="json") if emu is not None else None),
        "api": api,
        "model": model,
        "workload": workload,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "requests": requests,
        "arrival": arrival,
        "burstiness": burstiness,
        "warmup": warmup,
        "seed": seed,
        "slos": [s.text for s in slos],
        "min_success": min_success,
    }
    claim_search_dir(out, settings)
    header = ["Offered req/s", "Achieved req/s", "Output tok/s", *[s.text for s in slos], "Result"]

    def show(p) -> None:  # type: ignore[no-untyped-def]
        row = [
            f"{p.rate:g}",
            f"{p.achieved_req_s:.2f}",
            f"{p.output_tok_s:.0f}",
            *p.slo_values.values(),
            ("pass" if p.passed else "FAIL") + (" (reused)" if p.reused else ""),
        ]
        print(grid(header, [row]).splitlines()[3], flush=True)

    with _target(url, emu, backend) as (target_url, sut, metrics_url):

        def run_probe(rate: float, run_dir: Path) -> None:
            probe = RunOptions(
                url=target_url,
                out=run_dir,
                api=api,  # type: ignore[arg-type]
                backend=backend,
                model=model or "",
                api_key_env=api_key_env,
                workload=workload,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                requests=requests,
                arrivals=arrival_spec(arrival, rate, burstiness),
                warmup=warmup,
                seed=seed,
                sut=sut,
                metrics_url=metrics_url,
                progress=progress,
            )
            result = _run_async(benchmark(probe))
            if result.stopped is not None:
                code = {"interrupted": ExitCode.INTERRUPTED, "terminated": ExitCode.TERMINATED}
                raise Stopped(
                    f"capacity search stopped during the probe at {rate:g} req/s ({result.stopped}); the probes "
                    f"finished so far are kept in {out}: run the same command again to resume",
                    code.get(result.stopped, ExitCode.INCOMPLETE),
                )

        print("\n".join(grid(header, []).splitlines()[:3]), flush=True)
        result = search(
            run_probe, slos, out, start_rate, max_rate, tolerance, max_probes, min_success=min_success, on_probe=show
        )
    cap = result.capacity_req_s
    print(
        f"\ncapacity: {'none found (the lowest probe failed)' if cap is None else f'{cap:g} req/s'}"
        f"  bracket [{result.bracket[0]:g}, {result.bracket[1] if result.bracket[1] is not None else '-'}]"
        f"  after {len(result.probes)} probes" + (f"\nnote: {result.note}" if result.note else "")
    )
    print(f"probes and capacity.json: {out}")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)", parser=opt.host)] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one", parser=opt.integer(0, 65535))] = 8000,
    scheduler: opt.Scheduler = None,
    config: Annotated[
        Path | None, typer.Option(help="emulator config YAML/JSON", parser=opt.config_file(opt._emulator_config))
    ] = None,
) -> None:
    """Run the emulator standalone: an OpenAI-compatible server over the engine model."""
    from infermeter.emulator.server import serve as serve_forever

    emu = _emulator_config(config, scheduler)
    with contextlib.suppress(KeyboardInterrupt):
        try:
            _run_async(serve_forever(emu, host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): choose another --host/--port"
            ) from None


class _Terminated(Exception):
    """SIGTERM outside a run's own handling: unwind (stopping child processes), then exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2, never a traceback (README, "Exit codes")."""
    secrets.register(os.environ.get("OPENAI_API_KEY"))
    with contextlib.suppress(ValueError):  # not the main thread (tests calling main in-process)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = app(args=argv, prog_name="infermeter", standalone_mode=False)
    except UserError as exc:
        _say(f"error: {exc}")
        sys.exit(ExitCode.USAGE)
    except Stopped as exc:
        _say(str(exc), plain=True)
        sys.exit(exc.code)
    except KeyboardInterrupt:
        _say("interrupted", plain=True)
        sys.exit(ExitCode.INTERRUPTED)
    except _Terminated:
        _say("terminated (SIGTERM)", plain=True)
        sys.exit(ExitCode.TERMINATED)
    except Exception as exc:
        # typer's (vendored click) usage errors: a bad option or value, named in one line
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `infermeter`: typer has printed the help
                sys.exit(0)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
            _say(f"error: {exc.format_message()}{hint}")
            sys.exit(ExitCode.USAGE if int(exc.exit_code) == 2 else int(exc.exit_code))  # type: ignore[attr-defined]
        _crash(exc)
    if isinstance(code, int) and code:
        sys.exit(code)


def _say(message: str, plain: bool = False) -> None:
    """One line on stderr, secrets masked, never wrapped."""
    text = " ".join(secrets.redact(message).split())
    if plain:
        err.print(text, highlight=False, soft_wrap=True, markup=False)
    else:
        head, _, rest = text.partition(": ")
        err.print(f"[bold red]{head}:[/] ", end="", highlight=False, soft_wrap=True)
        err.print(rest, highlight=False, soft_wrap=True, markup=False)


def _crash(exc: BaseException) -> None:
    """A bug in infermeter: one line, and the (redacted) traceback in a file to attach to a report."""
    text = secrets.redact("".join(traceback.format_exception(exc)))
    path = Path(tempfile.gettempdir()) / f"infermeter-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    try:
        path.write_text(text)
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback could not be saved"
    _say(f"internal error: {type(exc).__name__}: {str(exc)[:200]} ({where}; please report it)", plain=True)
    sys.exit(ExitCode.INTERNAL)


if __name__ == "__main__":
    main()
