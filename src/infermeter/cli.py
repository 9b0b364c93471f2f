"""The `infermeter` command: one entry point, a subcommand per job."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import orjson
import typer
from rich.console import Console

from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.goodput import parse_slo
from infermeter.records import SUMMARY, RunInfo, read_records, read_run_info
from infermeter.report.console import comparison_table, full_report, sim_table
from infermeter.report.tables import grid
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.export import write_requests

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
        str | None, typer.Option("--itl-option", help="A, B or C; default: the one run.json declares")
    ] = None,
    slo: Annotated[str | None, typer.Option(help="goodput SLO, e.g. ttft=200ms,tpot=50ms; default: run.json's")] = None,
    deadlines: Annotated[
        str | None,
        typer.Option(
            help="fluidity deadlines: ttft=300ms|@curve.json,tbt=25ms[,target=0.9][,slack=50ms]; default: run.json's"
        ),
    ] = None,
) -> None:
    """Recompute and print the summary of any run directory (live, emulated or simulated)."""
    if itl_option is not None and itl_option.upper() not in ("A", "B", "C"):
        raise UserError(f"--itl-option must be A, B or C, got '{itl_option}'")
    results = []
    for run_dir in run_dirs:
        info = read_run_info(run_dir)
        option = (itl_option or info.itl_option).upper()
        bounds = parse_slo(slo) if slo is not None else dict(info.slo)
        spec = deadlines if deadlines is not None else getattr(info, "deadlines", None)
        cols = RecordColumns.from_table(read_records(run_dir))
        summary = summarize(cols, option, bounds, parse_deadlines(spec) if spec else None)  # type: ignore[arg-type]
        summary.update(_stored_blocks(run_dir, info))
        results.append((run_dir, info, summary))
    if json:
        payload = results[0][2] if len(results) == 1 else {str(d): s for d, _, s in results}
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return
    if len(results) > 1:
        print(comparison_table([(d.name or str(d), s) for d, _, s in results]))
        return
    _, info, summary = results[0]
    print(full_report(summary, info))
    if "sim" in summary:
        print()
        print(sim_table(summary))


def _stored_blocks(run_dir: Path, info: RunInfo) -> dict[str, object]:
    """Blocks the records alone cannot give back: the simulator's `sim` block, and ITL when only endpoints
    of each stream were recorded."""
    path = run_dir / SUMMARY
    if not path.is_file():
        return {}
    try:
        stored = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError:
        return {}
    keys = ["sim", "server_metrics", "energy"]
    if getattr(info, "token_times", "full") == "endpoints":
        keys += ["itl_ms", "jitter_ms", "max_pause_ms", "itl_source", "fluidity"]
    return {k: stored[k] for k in keys if k in stored}


@app.command()
def workload(
    name: Annotated[str, typer.Argument(help="standard workload name or a YAML/JSON workload file")],
    requests: Annotated[int, typer.Option("--requests", "-n", min=1, help="how many requests to draw")] = 1000,
    seed: Annotated[int, typer.Option(help="random seed (recorded)")] = 42,
    out: Annotated[Path, typer.Option(help="output file: .csv, .jsonl or .json (with the declaration)")] = Path(
        "workload.csv"
    ),
    rate: Annotated[float | None, typer.Option(help="arrival rate, requests/s (offsets are 0 without one)")] = None,
    arrival: Annotated[str, typer.Option(help="poisson, gamma, constant or uniform")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape: 1 is Poisson, below 1 burstier")] = 1.0,
    trace: Annotated[Path | None, typer.Option(help="a BurstGPT CSV: lengths and arrivals from the trace")] = None,
    rps_scale: Annotated[float, typer.Option(help="trace arrivals compressed this many times")] = 1.0,
) -> None:
    """Write a workload's requests (lengths, classes, prefixes, arrival offsets) to inspect them."""
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
    bins: int,
    bin_key: str,
    latency: str | None,
    kv_tokens: int | None,
    prediction_noise: float,
    sla_token_ms: float,
    sla_request_s: float,
    config: Path | None,
):  # type: ignore[no-untyped-def]
    from infermeter.engine.config import SCHEDULERS, EngineConfig, load_engine_config

    if scheduler not in SCHEDULERS:
        raise UserError(f"--scheduler must be one of {', '.join(SCHEDULERS)}, got '{scheduler}'")
    base = load_engine_config(config) if config else EngineConfig()
    update: dict[str, object] = {
        "scheduler": scheduler,
        "bins": bins,
        "bin_key": bin_key,
        "prediction_noise": prediction_noise,
        "d_sla_token": sla_token_ms / 1000,
        "d_sla_request": sla_request_s,
    }
    if latency is not None:
        if latency not in ("batch", "iteration"):
            raise UserError(f"--latency must be batch or iteration, got '{latency}'")
        update["latency"] = latency
    if kv_tokens is not None:
        update["kv_capacity_tokens"] = kv_tokens
    return EngineConfig.model_validate({**base.model_dump(), **update})


@app.command()
def sim(
    workload: Annotated[str, typer.Option(help="standard workload name or YAML/JSON file")] = "synthetic-skewed",
    trace: Annotated[Path | None, typer.Option(help="a BurstGPT CSV: lengths and arrival times")] = None,
    rps_scale: Annotated[float, typer.Option(help="trace arrivals compressed this many times")] = 1.0,
    requests: Annotated[int, typer.Option("--requests", "-n", min=1)] = 1000,
    rate: Annotated[float | None, typer.Option(help="requests/s; without it every request arrives at t=0")] = None,
    arrival: Annotated[str, typer.Option(help="poisson, gamma, constant or uniform")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape (1 = Poisson)")] = 1.0,
    scheduler: Annotated[
        str, typer.Option(help="static_fifo, dynamic_no_bins, multi_bin_dynamic, continuous, chunked_prefill")
    ] = "continuous",
    engines: Annotated[int, typer.Option(min=1, help="engines (GPUs) in the pool")] = 1,
    bins: Annotated[int, typer.Option(min=1, help="K bins for multi_bin_dynamic")] = 4,
    bin_key: Annotated[
        str, typer.Option(help="bin by 'total' (prompt + predicted output) or 'output' (the seed)")
    ] = "total",
    latency: Annotated[str | None, typer.Option(help="batch (seed T(b,L)) or iteration; default per scheduler")] = None,
    kv_tokens: Annotated[int | None, typer.Option(help="KV capacity per engine in tokens (overrides memory)")] = None,
    prediction_noise: Annotated[float, typer.Option(help="output-length predictor: lognormal sigma, 0 = oracle")] = 0.0,
    sla_token_ms: Annotated[float, typer.Option(help="per-token decode SLA (seed D_SLA_TOKEN)")] = 10.0,
    sla_request_s: Annotated[float, typer.Option(help="per-request latency SLA (seed D_SLA_REQUEST)")] = 20.0,
    config: Annotated[Path | None, typer.Option(help="engine config YAML/JSON (any EngineConfig field)")] = None,
    token_times: Annotated[str, typer.Option(help="auto, full or endpoints")] = "auto",
    slo: Annotated[str | None, typer.Option(help="goodput SLO, e.g. ttft=500ms,tpot=50ms")] = None,
    deadlines: Annotated[str | None, typer.Option(help="fluidity deadlines: ttft=300ms,tbt=25ms[,target=0.9]")] = None,
    seed: Annotated[int, typer.Option()] = 42,
    out: Annotated[Path, typer.Option(help="run directory to write")] = Path("runs/sim"),
) -> None:
    """Simulate one engine configuration on a virtual clock and write a run directory."""
    from rich.progress import Progress

    from infermeter.sim import simulate, write_sim_run

    if token_times not in ("auto", "full", "endpoints"):
        raise UserError(f"--token-times must be auto, full or endpoints, got '{token_times}'")
    if bin_key not in ("total", "output"):
        raise UserError(f"--bin-key must be total or output, got '{bin_key}'")
    reqs, declaration = _workload_requests(requests, seed, workload, trace, rps_scale, rate, arrival, burstiness)
    cfg = _engine_config(
        scheduler, bins, bin_key, latency, kv_tokens, prediction_noise, sla_token_ms, sla_request_s, config
    )
    bounds = parse_slo(slo) if slo else None
    with Progress(console=err, transient=True) as bar:
        task = bar.add_task(f"simulating {cfg.scheduler} x {engines}", total=len(reqs))
        outcome = simulate(reqs, cfg, engines, seed, progress=lambda done: bar.update(task, completed=done))
    if deadlines is not None:
        parse_deadlines(deadlines)
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


def _parse_warmup(text: str) -> int:
    """auto: the draft's rule (-1); off: none (0); N: exactly N warm-up requests."""
    if text.isdigit():
        return int(text)
    warm = {"auto": -1, "off": 0}.get(text.lower())
    if warm is None:
        raise UserError(f"--warmup must be auto, off or a number of requests, got '{text}'")
    return warm


def _emulator_config(path: Path | None, scheduler: str | None):  # type: ignore[no-untyped-def]
    """The emulator's configuration from --config / --emulator-config, with --scheduler applied."""
    from infermeter.emulator.config import EmulatorConfig, load_emulator_config
    from infermeter.engine.config import SCHEDULERS

    emu = load_emulator_config(path) if path else EmulatorConfig()
    if scheduler is not None:
        if scheduler not in SCHEDULERS:
            raise UserError(f"--scheduler must be one of {', '.join(SCHEDULERS)}, got '{scheduler}'")
        emu.engine.scheduler = scheduler
    return emu


def _json_object(text: str, option: str) -> dict[str, object]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UserError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UserError(f'{option} must be a JSON object, e.g. \'{{"logit_bias": {{"2": -100}}}}\'')
    return value


def _int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(float(x)) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option} takes comma-separated whole numbers, got '{text}'") from None
    if not values or min(values) < 1:
        raise UserError(f"{option} needs positive numbers, got '{text}'")
    return values


@app.command("sim-sweep")
def sim_sweep(
    out: Annotated[Path, typer.Option(help="directory for step1_grid_search.csv and step2_comparison.csv")] = Path(
        "runs/sweep"
    ),
    requests: Annotated[str, typer.Option(help="request counts")] = "1000,10000,100000,1000000",
    gpus: Annotated[str, typer.Option(help="GPU counts")] = "1,2,4,8,16,32,64,100",
    bins: Annotated[str, typer.Option(help="K values")] = "1,2,4,8,16,32",
    step: Annotated[str, typer.Option(help="1, 2 or both")] = "both",
    workload: Annotated[str, typer.Option(help="standard workload name or YAML/JSON file")] = "synthetic-skewed",
    trace: Annotated[Path | None, typer.Option(help="a BurstGPT CSV: lengths and arrival times")] = None,
    rps_scale: Annotated[float, typer.Option(help="trace arrivals compressed this many times")] = 10.0,
    rate: Annotated[float | None, typer.Option(help="requests/s for synthetic workloads")] = 27.0,
    arrival: Annotated[str, typer.Option()] = "poisson",
    burstiness: Annotated[float, typer.Option()] = 1.0,
    bin_key: Annotated[str, typer.Option(help="total or output")] = "total",
    sla_token_ms: Annotated[float, typer.Option()] = 10.0,
    sla_request_s: Annotated[float, typer.Option()] = 20.0,
    seed: Annotated[int, typer.Option()] = 42,
) -> None:
    """The seed's step 1 grid (requests x GPUs x K) and step 2 method comparison, resumable, as CSVs."""
    from rich.progress import Progress

    from infermeter.sim.experiments import STEP1_CSV, STEP2_CSV, run_experiments, step1_grid, step2_methods

    if step not in ("1", "2", "both"):
        raise UserError(f"--step must be 1, 2 or both, got '{step}'")
    counts = _int_list(requests, "--requests")
    base = _engine_config("multi_bin_dynamic", 4, bin_key, None, None, 0.0, sla_token_ms, sla_request_s, None)
    cache: dict[int, object] = {}

    def make(n: int):  # type: ignore[no-untyped-def]
        if n not in cache:
            cache[n] = _workload_requests(
                n, seed, workload, trace, rps_scale, None if trace else rate, arrival, burstiness
            )[0]
        return cache[n]

    with Progress(console=err) as bar:
        if step in ("1", "both"):
            plan = step1_grid(counts, _int_list(gpus, "--gpus"), _int_list(bins, "--bins"))
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
    grid_csv: Annotated[Path, typer.Argument(help="latency grid CSV (batch_size, max_seq_len, mean_latency_sec, ...)")],
) -> None:
    """Fit the seed's batch latency model T(b, L) = alpha + beta * L * h(b) to a measured grid."""
    from infermeter.engine.calibration import fit_grid_file

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
        str | None, typer.Option(help="server base URL; without it the embedded emulator is benchmarked")
    ] = None,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    model: Annotated[str | None, typer.Option(help="model name; default: the first the server lists")] = None,
    workload: Annotated[str | None, typer.Option(help="standard workload name or YAML/JSON file")] = None,
    input_tokens: Annotated[int | None, typer.Option(min=1, help="fixed prompt length (with --output-tokens)")] = None,
    output_tokens: Annotated[int | None, typer.Option(min=1, help="fixed output length (with --input-tokens)")] = None,
    requests: Annotated[int | None, typer.Option("--requests", "-n", min=1, help="requests to measure")] = None,
    duration: Annotated[float | None, typer.Option(min=0.001, help="stop sending after this many seconds")] = None,
    rate: Annotated[float | None, typer.Option(help="open loop: requests per second")] = None,
    arrival: Annotated[str, typer.Option(help="poisson, gamma, constant or uniform")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="gamma shape: 1 is Poisson, below 1 burstier")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(min=1, help="closed loop: requests kept in flight")] = None,
    barrier: Annotated[bool, typer.Option(help="closed loop: release the first C requests together")] = False,
    warmup: Annotated[str, typer.Option(help="auto (>= 100 requests and 10,000 tokens), N requests, or off")] = "auto",
    seed: Annotated[int, typer.Option(help="workload seed (recorded)")] = 42,
    slo: Annotated[str | None, typer.Option(help="goodput SLO, e.g. ttft=200ms,tpot=50ms")] = None,
    deadlines: Annotated[
        str | None, typer.Option(help="fluidity deadlines: ttft=300ms|@curve.json,tbt=25ms[,target=0.9][,slack=50ms]")
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="exact-length prompts: cl100k_base, o200k_base, tokenizer.json or .gguf (chat template "
            "with --api chat)"
        ),
    ] = None,
    ignore_eos: Annotated[
        bool,
        typer.Option(
            help="ask the server to run every reply to max_tokens (vLLM, llama.cpp; hosted APIs may reject it)"
        ),
    ] = True,
    extra_body: Annotated[
        str | None, typer.Option(help='JSON merged into every request body, e.g. \'{"logit_bias": {"2": -100}}\'')
    ] = None,
    scrape_interval: Annotated[float, typer.Option(help="seconds between server /metrics scrapes (0: off)")] = 1.0,
    telemetry_interval: Annotated[float, typer.Option(help="seconds between host telemetry samples (0: off)")] = 1.0,
    gpu_price: Annotated[float | None, typer.Option(help="price per GPU-hour, for cost per million tokens")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs serving (cost denominator; default: NVML count)")] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default runs/run-YYYYmmdd-HHMMSS)")] = None,
    timeout: Annotated[float, typer.Option(help="total seconds allowed per request")] = 900.0,
    first_token_timeout: Annotated[float, typer.Option(help="seconds allowed until the first token")] = 120.0,
    emulator_config: Annotated[Path | None, typer.Option(help="emulator config YAML/JSON (runs without --url)")] = None,
    scheduler: Annotated[str | None, typer.Option(help="emulator scheduler (runs without --url)")] = None,
    progress: Annotated[bool, typer.Option(help="show live progress")] = True,
) -> None:
    """Benchmark a server, or the embedded emulator when no --url is given; ends with the minimum report."""
    import time as _time

    from infermeter.load.run import RunOptions, benchmark
    from infermeter.report.console import minimum_report

    if api not in ("completions", "chat"):
        raise UserError(f"--api must be completions or chat, got '{api}'")
    if rate is not None and concurrency is not None:
        raise UserError("give either --rate (open loop) or --concurrency (closed loop), not both")
    if url is None and rate is None and concurrency is None:
        rate = 20.0  # the demo: the emulator at a moderate open-loop load
    if url is not None and rate is None and concurrency is None:
        raise UserError("give a load: --rate R (open loop) or --concurrency C (closed loop)")
    warm = _parse_warmup(warmup)
    if deadlines is not None:
        parse_deadlines(deadlines)  # a bad spec fails before anything is sent
    if workload is None and input_tokens is None and output_tokens is None:
        workload = "synthetic-uniform"
    if requests is None and duration is None:
        requests = 300 if url is None else 1000
    opts = RunOptions(
        url=url or "",
        out=out or Path("runs") / _time.strftime("run-%Y%m%d-%H%M%S"),
        api=api,  # type: ignore[arg-type]
        model=model or "",
        workload=workload,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        requests=requests,
        duration=duration,
        arrivals=arrival_spec(arrival, rate, burstiness) if rate is not None else None,
        concurrency=concurrency,
        barrier=barrier,
        warmup=warm,
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
        extra_body=_json_object(extra_body, "--extra-body") if extra_body else {},
        ignore_eos=ignore_eos,
    )
    with _target(url, emulator_config, scheduler) as (target_url, sut):
        opts.url, opts.sut = target_url, sut
        run_dir, summary = _run_async(benchmark(opts))
    print(minimum_report(summary, read_run_info(run_dir)))
    print(f"\nrun directory: {run_dir}  (full tables: infermeter report {run_dir})")


@contextlib.contextmanager
def _target(url: str | None, emulator_config: Path | None, scheduler: str | None):  # type: ignore[no-untyped-def]
    """Yield (base URL, SUT declaration): the given server, or the embedded emulator started for the block."""
    if url is not None:
        yield url, {}
        return
    from infermeter.emulator.process import running_emulator

    emu = _emulator_config(emulator_config, scheduler)
    engine = emu.engine
    sut = {
        "emulated": True,
        "hardware": f"emulated engine ({engine.latency_model().name} latency model, KV {engine.capacity()} tokens)",
        "software": f"infermeter emulator, scheduler {engine.scheduler}, speed x{emu.speed:g}",
        "boundary": "Model Engine",
        "prefix_caching": "enabled" if emu.prefix_caching else "disabled",
        "guardrails": f"input filter {emu.input_filter_ms:g} ms, output filter {emu.output_filter_ms:g} ms"
        if emu.input_filter_ms or emu.output_filter_ms
        else "none",
    }
    err.print("starting the embedded emulator (no --url given)")
    with running_emulator(emu, pin_cpus=True) as emu_url:
        yield emu_url, sut


@app.command()
def prompt(
    tokenizer: Annotated[str, typer.Option(help="cl100k_base, o200k_base, a tokenizer.json or a .gguf file")],
    tokens: Annotated[int, typer.Option(min=1, help="exact token count of the prompt")],
    chat: Annotated[bool, typer.Option(help="count after the tokenizer's chat template")] = False,
    json: Annotated[bool, typer.Option("--json", help='print {"prompt", "tokens", "tokenizer"}')] = False,
    seed: Annotated[int, typer.Option()] = 0,
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
    url: Annotated[str | None, typer.Option(help="server base URL; without it the embedded emulator")] = None,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    model: Annotated[str | None, typer.Option(help="model name; default: the first the server lists")] = None,
    lengths: Annotated[str, typer.Option(help="prompt lengths to profile")] = "128,256,512,1024,2048,4096,8192",
    repeats: Annotated[int, typer.Option(min=1, help="requests per length (the minimum TTFT is kept)")] = 3,
    decode_tokens: Annotated[int, typer.Option(min=1, help="output tokens per request")] = 4,
    out: Annotated[Path, typer.Option(help="where to save the fitted curve (JSON)")] = Path("prefill_curve.json"),
    emulator_config: Annotated[Path | None, typer.Option(help="emulator config (runs without --url)")] = None,
) -> None:
    """Fit TTFT against prompt length from isolated requests; use it as --deadlines ttft=@FILE,slack=..."""
    from infermeter.client.openai import ClientConfig
    from infermeter.load.run import discover_model
    from infermeter.suites.prefill import profile_prefill

    if api not in ("completions", "chat"):
        raise UserError(f"--api must be completions or chat, got '{api}'")
    points = _int_list(lengths, "--lengths")
    rows: list[list[str]] = []

    def on_point(length: int, ttft: float | None) -> None:
        err.print(f"  {length:>7} tokens: min TTFT {'failed' if ttft is None else f'{ttft * 1000:.2f} ms'}")

    with _target(url, emulator_config, None) as (target_url, _):
        name = model or _run_async(discover_model(target_url))
        cfg = ClientConfig(target_url, api, name)  # type: ignore[arg-type]
        curve = _run_async(profile_prefill(cfg, points, repeats, decode_tokens, on_point))
    curve.save(out)
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
    slo: Annotated[
        list[str],
        typer.Option(
            help="repeatable: ttft:p99<=500ms | fluidity:tbt=25ms,ttft=300ms,"
            "target=0.9,share=0.99 | goodput:ttft=200ms,tpot=50ms,fraction=0.9"
        ),
    ],
    url: Annotated[str | None, typer.Option(help="server base URL; without it the embedded emulator")] = None,
    api: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    model: Annotated[str | None, typer.Option(help="model name; default: the first the server lists")] = None,
    workload: Annotated[str | None, typer.Option(help="standard workload name or YAML/JSON file")] = None,
    input_tokens: Annotated[int | None, typer.Option(min=1)] = None,
    output_tokens: Annotated[int | None, typer.Option(min=1)] = None,
    requests: Annotated[int, typer.Option("--requests", "-n", min=1, help="requests per probe")] = 300,
    arrival: Annotated[str, typer.Option(help="poisson, gamma, constant or uniform")] = "poisson",
    burstiness: Annotated[float, typer.Option()] = 1.0,
    start_rate: Annotated[float, typer.Option(help="first offered rate, req/s")] = 1.0,
    max_rate: Annotated[float, typer.Option(help="never probe above this rate")] = 1000.0,
    tolerance: Annotated[float, typer.Option(help="stop when (fail - pass) / fail is below this")] = 0.05,
    max_probes: Annotated[int, typer.Option(min=1)] = 12,
    min_success: Annotated[float, typer.Option(help="a probe also needs this share of requests to succeed")] = 0.99,
    warmup: Annotated[str, typer.Option(help="auto, N requests, or off (per probe)")] = "auto",
    seed: Annotated[int, typer.Option()] = 42,
    out: Annotated[Path, typer.Option(help="directory for the probes and capacity.json")] = Path("runs/capacity"),
    emulator_config: Annotated[Path | None, typer.Option(help="emulator config (runs without --url)")] = None,
    scheduler: Annotated[str | None, typer.Option(help="emulator scheduler (runs without --url)")] = None,
    progress: Annotated[bool, typer.Option(help="show live progress of each probe")] = True,
) -> None:
    """Search the highest request rate that meets every SLO; each probe is a full run, kept for resuming."""
    from infermeter.load.run import RunOptions, benchmark
    from infermeter.suites.capacity import search
    from infermeter.suites.slo import parse_capacity_slo

    slos = [parse_capacity_slo(s) for s in slo]
    warm = _parse_warmup(warmup)
    if workload is None and input_tokens is None and output_tokens is None:
        workload = "synthetic-uniform"
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

    with _target(url, emulator_config, scheduler) as (target_url, sut):
        name = model or ""

        def run_probe(rate: float, run_dir: Path) -> None:
            opts = RunOptions(
                url=target_url,
                out=run_dir,
                api=api,
                model=name,
                workload=workload,  # type: ignore[arg-type]
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                requests=requests,
                arrivals=arrival_spec(arrival, rate, burstiness),
                warmup=warm,
                seed=seed,
                sut=sut,
                progress=progress,
            )
            _run_async(benchmark(opts))

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
    host: Annotated[str, typer.Option(help="address to bind (loopback by default)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port; 0 picks a free one")] = 8000,
    scheduler: Annotated[str | None, typer.Option(help="engine scheduler")] = None,
    config: Annotated[Path | None, typer.Option(help="emulator config YAML/JSON")] = None,
) -> None:
    """Run the emulator standalone: an OpenAI-compatible server over the engine model."""
    import contextlib

    from infermeter.emulator.server import serve as serve_forever

    emu = _emulator_config(config, scheduler)
    with contextlib.suppress(KeyboardInterrupt):
        _run_async(serve_forever(emu, host, port))


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2, never a traceback."""
    try:
        code = app(standalone_mode=False)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        # typer's (vendored click) usage errors: a bad option or value, named in one line
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `infermeter`: typer has printed the help
                sys.exit(0)
            hint = f" (see infermeter {exc.ctx.info_name} --help)" if getattr(exc, "ctx", None) else ""  # type: ignore[attr-defined]
            err.print(f"[bold red]error:[/] {exc.format_message()}{hint}", highlight=False, soft_wrap=True)
            sys.exit(int(exc.exit_code))  # type: ignore[attr-defined]
        raise
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
