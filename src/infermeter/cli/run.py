"""Commands that send load: `run`, `capacity` and `profile-prefill`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import (
    api_key,
    app,
    emulator_settings,
    err,
    finish_run,
    probe_client,
    refuse_existing_run,
    refuse_run_file,
    run_async,
    target,
    trace_length,
)
from infermeter.config.run import Disclosures, Load, Monitors, Objectives, Scale, Target, Workload
from infermeter.config.scenario import Given
from infermeter.errors import ExitCode, Stopped, UserError
from infermeter.records import (
    read_run_info,
)
from infermeter.report.tables import grid
from infermeter.workload.build import arrival_spec, build_requests

RUN_PARTS = (
    opt.Part("target", Target),
    opt.Part("workload", Workload),
    opt.Part("load", Load),
    opt.Part("objectives", Objectives),
    opt.Part("monitors", Monitors),
    opt.Part("disclosures", Disclosures),
    opt.Part("scale", Scale),
)


@app.command()
@opt.built_from(*RUN_PARTS)
def run(
    given: Given,
    config: opt.ScenarioFile = None,
    out: Annotated[
        Path | None, typer.Option(help="run directory (default runs/run-YYYYmmdd-HHMMSS)", parser=opt.out_path)
    ] = None,
    emulator_config: opt.EmulatorConfigFile = None,
    scheduler: opt.Scheduler = None,
    progress: opt.Progress = True,
) -> None:
    """Benchmark a server, or the embedded emulator when no --url is given; ends with the minimum report.  Options
    may come from a scenario file (--config), and RUN_DIR/run.json runs a run again."""
    from infermeter.config.scenario import run_config
    from infermeter.load.run import benchmark
    from infermeter.report.console import minimum_report

    cfg = run_config(config, given, emulator_config, scheduler)
    api_key(cfg.target.api_key_env)
    w, load = cfg.workload, cfg.load
    cfg = cfg.resolved(trace_length(w.trace) if w.trace is not None and load.requests is None else None)
    w, load = cfg.workload, cfg.load
    # checks the workload options before anything starts (a trace: that it holds the requests asked for)
    checked = load.requests if w.trace is not None and load.requests is not None else 1
    build_requests(checked, w.seed, w.workload, w.input_tokens, w.output_tokens, trace=w.trace, rps_scale=w.rps_scale)
    run_dir = out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    refuse_existing_run(run_dir)
    run_opts = cfg.options(run_dir, progress)
    with target(cfg.target.url, cfg.emulator, cfg.target.backend) as (target_url, sut, metrics_url):
        run_opts.url, run_opts.sut, run_opts.metrics_url = target_url, sut, metrics_url
        result = run_async(benchmark(run_opts))
    print(minimum_report(result.summary, read_run_info(result.run_dir)))
    print(f"\nrun directory: {result.run_dir}  (full tables: infermeter report {result.run_dir})")
    finish_run(result)


CAPACITY_PARTS = (
    opt.Part("target", Target),
    opt.Part("workload", Workload, only=("workload", "input_tokens", "output_tokens", "trace", "tokenizer", "seed")),
    opt.Part(
        "load",
        Load,
        only=("requests", "arrival", "burstiness", "warmup"),
        defaults={"requests": 300},
        help={"requests": "requests per probe", "warmup": "auto, N requests, or off (per probe)"},
    ),
    opt.Part("disclosures", Disclosures),
)


@app.command()
@opt.built_from(*CAPACITY_PARTS)
def capacity(
    given: Given,
    slo: opt.CapacitySlo,
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
    out: Annotated[Path, typer.Option(help="directory for the probes and capacity.json", parser=opt.out_path)] = Path(
        "runs/capacity"
    ),
    emulator_config: opt.EmulatorConfigFile = None,
    scheduler: opt.Scheduler = None,
    progress: Annotated[bool, typer.Option(help="show live progress of each probe")] = True,
) -> None:
    """Search the highest request rate that meets every SLO; each probe is a full run, kept for resuming.  With
    --trace each probe replays the trace's lengths and arrival pattern, scaled to the probe's rate."""
    from infermeter.config.scenario import run_config
    from infermeter.load.run import benchmark
    from infermeter.suites.capacity import claim_search_dir, search
    from infermeter.suites.slo import parse_capacity_slo
    from infermeter.workload.traces import load_burstgpt, offered_rate

    slos = [parse_capacity_slo(s) for s in slo]
    if max_rate < start_rate:
        raise UserError(f"--max-rate ({max_rate:g}) is below --start-rate ({start_rate:g})")
    load = given.setdefault("load", {})
    load.setdefault("rate", start_rate)  # a placeholder: each probe sets its own
    cfg = run_config(None, given, emulator_config, scheduler)
    api_key(cfg.target.api_key_env)
    cfg = cfg.resolved()
    w, requests = cfg.workload, cfg.load.requests or 300
    build_requests(requests if w.trace else 1, w.seed, w.workload, w.input_tokens, w.output_tokens, trace=w.trace)
    if w.trace is not None and (cfg.load.arrival != "poisson" or cfg.load.burstiness != 1.0):
        raise UserError(
            "--arrival and --burstiness shape a rate's arrivals: with --trace each probe keeps the trace's own "
            "pattern, scaled to its rate: drop them"
        )
    natural = offered_rate(load_burstgpt(w.trace, requests)) if w.trace is not None else None
    arrival_spec(cfg.load.arrival, start_rate, cfg.load.burstiness)
    url, emu, backend = cfg.target.url, cfg.emulator, cfg.target.backend
    settings = {
        "config": cfg.model_dump(mode="json", exclude={"load": {"rate"}}),
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

    with target(url, emu, backend) as (target_url, sut, metrics_url):

        def run_probe(rate: float, run_dir: Path) -> None:
            probe_cfg = cfg.model_copy(update={"load": cfg.load.model_copy(update={"rate": rate})})
            if natural is not None:  # the trace's own arrival pattern, compressed to the probe's rate
                scaled = w.model_copy(update={"rps_scale": rate / natural})
                probe_cfg = probe_cfg.model_copy(
                    update={"workload": scaled, "load": cfg.load.model_copy(update={"rate": None})}
                )
            probe = probe_cfg.options(run_dir, progress)
            probe.url, probe.sut, probe.metrics_url = target_url, sut, metrics_url
            result = run_async(benchmark(probe))
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


@app.command("profile-prefill")
def profile_prefill_cmd(
    url: opt.Url = None,
    api: opt.Api = "completions",
    backend: opt.BackendName = "openai",
    model: opt.Model = None,
    api_key_env: opt.ApiKeyEnv = "OPENAI_API_KEY",
    extra_body: opt.ExtraBody = None,
    ignore_eos: opt.IgnoreEos = True,
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
    tokenizer: opt.Tokenizer = None,
    emulator_config: opt.EmulatorConfigFile = None,
) -> None:
    """Fit TTFT against prompt length from isolated requests; use it as --deadlines ttft=@FILE,slack=..."""
    from infermeter.suites.prefill import profile_prefill

    lengths = opt.flat(lengths)
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file name for the curve, e.g. prefill_curve.json")
    refuse_run_file(out)
    if len(set(lengths)) < 3:
        raise UserError(f"--lengths needs at least three different lengths to fit a curve, got {len(set(lengths))}")
    api_key(api_key_env)
    emu = None if url is not None else emulator_settings(emulator_config, None)
    rows: list[list[str]] = []

    def on_point(length: int, ttft: float | None) -> None:
        err.print(f"  {length:>7} tokens: min TTFT {'failed' if ttft is None else f'{ttft * 1000:.2f} ms'}")

    with target(url, emu, backend) as (target_url, sut, _):
        cfg = probe_client(target_url, sut, backend, api, model, api_key_env, extra_body, ignore_eos)
        declared = sut.get("tokenizer")
        curve = run_async(profile_prefill(cfg, lengths, repeats, decode_tokens, on_point, backend, tokenizer, declared))
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
