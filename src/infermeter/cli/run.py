"""Commands that send load: `run`, `capacity` and `profile-prefill`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, emulator_settings, err, finish_run, refuse_run_file
from infermeter.config.run import Disclosures, Load, Target, Workload
from infermeter.config.scenario import Given
from infermeter.config.sections import DATASET_FIELDS
from infermeter.errors import UserError
from infermeter.event_loop import run_async
from infermeter.python_api.benchmarking import RUN_FIELDS
from infermeter.report.tables import grid

RUN_PARTS = tuple(opt.Part(f.key, f.section) for f in RUN_FIELDS)  # the Python API's `benchmark` takes the same


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
    export: opt.Exports = None,
) -> None:
    """Benchmark a server, or the embedded emulator when no --url is given; ends with the minimum report.  Options
    may come from a scenario file (--config), and RUN_DIR/run.json runs a run again."""
    from infermeter.python_api import exporting
    from infermeter.python_api.benchmarking import measure, prepare, run_configuration, run_text, stopped_by

    cfg = run_configuration(config, given, emulator_config, scheduler)  # each --export was checked as its value
    result = measure(prepare(cfg, out), progress, err.print)
    print(run_text(result))
    exporting.print_warnings(exporting.send_run(export or [], result.run_dir, stopped_by(result)))
    finish_run(result)


CAPACITY_WORKLOAD = ("workload", "input_tokens", "output_tokens", "trace", *DATASET_FIELDS, "tokenizer", "seed")
CAPACITY_PARTS = (
    opt.Part("target", Target),
    opt.Part("workload", Workload, only=CAPACITY_WORKLOAD),
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
    --trace (or a --dataset with timestamps) each probe replays the file's lengths and arrival pattern, scaled to
    the probe's rate; a --dataset without them sends its requests at each probe's rate."""
    from infermeter.config.scenario import run_config
    from infermeter.metrics.slo import parse_capacity_slo
    from infermeter.python_api.endpoint import serving
    from infermeter.python_api.preflight import api_key
    from infermeter.suites.capacity_probes import Bounds, CapacitySearch

    slos = [parse_capacity_slo(s) for s in slo]
    if max_rate < start_rate:
        raise UserError(f"--max-rate ({max_rate:g}) is below --start-rate ({start_rate:g})")
    given.setdefault("load", {}).setdefault("rate", start_rate)  # a placeholder: each probe sets its own
    cfg = run_config(None, given, emulator_config, scheduler)
    api_key(cfg.target.api_key_env)
    cfg = cfg.resolved()
    bounds = Bounds(start_rate, max_rate, tolerance, max_probes, min_success)
    search = CapacitySearch.prepare(cfg, slos, bounds, out, progress)
    header = ["Offered req/s", "Achieved req/s", "Output tok/s", *[s.text for s in slos], "Result"]

    def show(p: Any) -> None:
        row = [
            f"{p.rate:g}",
            f"{p.achieved_req_s:.2f}",
            f"{p.output_tok_s:.0f}",
            *p.slo_values.values(),
            ("pass" if p.passed else "FAIL") + (" (reused)" if p.reused else ""),
        ]
        print(grid(header, [row]).splitlines()[3], flush=True)

    with serving(cfg.target.url, cfg.emulator, cfg.target.backend, err.print) as endpoint:
        print("\n".join(grid(header, []).splitlines()[:3]), flush=True)
        result = search.run(endpoint, on_probe=show)
    cap = result.capacity_req_s
    print(
        f"\ncapacity: {'none found (the lowest probe failed)' if cap is None else f'{cap:g} req/s'}"
        f"  bracket [{result.bracket[0]:g}, {result.bracket[1] if result.bracket[1] is not None else '-'}]"
        f"  after {len(result.probes)} probes" + (f"\nnote: {result.note}" if result.note else "")
    )
    print(f"probes and capacity.json: {out}")


PREFILL_PARTS = (
    opt.Part("target", Target, only=("url", "backend", "api", "model", "api_key_env", "extra_body", "ignore_eos")),
    opt.Part("workload", Workload, only=("tokenizer",)),
)


@app.command("profile-prefill")
@opt.built_from(*PREFILL_PARTS)
def profile_prefill_cmd(
    given: Given,
    lengths: Annotated[
        list[int],
        typer.Option(help="prompt lengths to profile, comma-separated", parser=opt.int_list(1, opt.MAX_LENGTH)),
    ] = (128, 256, 512, 1024, 2048, 4096, 8192),  # type: ignore[assignment]  # typer takes a tuple default; a list is mutable
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
    from infermeter.load.target import resolve_target
    from infermeter.python_api.endpoint import serving
    from infermeter.python_api.preflight import api_key
    from infermeter.suites.prefill import profile_prefill

    lengths = opt.flat(lengths)
    if out.is_dir():
        raise UserError(f"--out {out} is a directory: give a file name for the curve, e.g. prefill_curve.json")
    refuse_run_file(out)
    if len(set(lengths)) < 3:
        raise UserError(f"--lengths needs at least three different lengths to fit a curve, got {len(set(lengths))}")
    section = Target.from_options(given.get("target", {}))
    tokenizer = given.get("workload", {}).get("tokenizer")
    api_key(section.api_key_env)
    emu = None if section.url is not None else emulator_settings(emulator_config, None)
    rows: list[list[str]] = []

    def on_point(length: int, ttft: float | None) -> None:
        err.print(f"  {length:>7} tokens: min TTFT {'failed' if ttft is None else f'{ttft * 1000:.2f} ms'}")

    with serving(section.url, emu, section.backend, err.print) as endpoint:
        cfg = run_async(resolve_target(section, endpoint)).client
        declared = endpoint.sut.get("tokenizer")
        curve = run_async(
            profile_prefill(cfg, lengths, repeats, decode_tokens, on_point, section.backend, tokenizer, declared)
        )
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
