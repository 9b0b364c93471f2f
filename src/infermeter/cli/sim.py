"""The wind tunnel on a virtual clock: `sim` and `sim-sweep`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err
from infermeter.config.engine import SimEngine
from infermeter.config.section import Given
from infermeter.config.sections import Load, Scale, Workload
from infermeter.config.sweep import Sweep
from infermeter.python_api.simulation import DEFAULT_OUT, SIM_FIELDS, TOKEN_TIMES
from infermeter.report.tables import grid

if TYPE_CHECKING:
    from infermeter.sim.hypotheses import HypothesisReport

SIM_HELP = {"requests": opt.REQUESTS_TO_SEND, "rate": opt.ARRIVAL_RATE}  # a simulation's reading of them
SIM_PARTS = tuple(opt.Part(f.key, f.section, f.only, dict(f.defaults), SIM_HELP) for f in SIM_FIELDS)
TokenTimesOption = Annotated[str, typer.Option(help="auto, full or endpoints", parser=opt.choice(*TOKEN_TIMES))]


@app.command()
@opt.built_from(*SIM_PARTS)
def sim(
    given: Given,
    token_times: TokenTimesOption = "auto",
    out: Annotated[Path, typer.Option(help="run directory to write", parser=opt.out_path)] = DEFAULT_OUT,
    export: opt.Exports = None,
) -> None:
    """Simulate one engine configuration on a virtual clock and write a run directory."""
    from infermeter.python_api import exporting
    from infermeter.python_api.simulation import plan_simulation, run_simulation, sim_text

    plan = plan_simulation(given, token_times, out)  # each --export was checked as the option's value
    done = run_simulation(plan, err)
    print(sim_text(done))
    exporting.print_warnings(exporting.send_run(export or [], done.out))


SWEEP_PARTS = (
    opt.Part("sweep", Sweep),
    opt.Part(
        "workload",
        Workload,
        only=("workload", "trace", "rps_scale"),
        defaults={"workload": "synthetic-skewed", "rps_scale": None},  # without --rps-scale: the levels
        help={"rps_scale": "trace arrivals compressed this many times; replaces --levels"},
    ),
    opt.Part(
        "load",
        Load,
        only=("rate", "arrival", "burstiness"),
        help={"rate": "requests/s for a synthetic workload; replaces --levels with this one rate"},
    ),
    opt.Part("engine", SimEngine, only=("bin_key", "sla_token_ms", "sla_request_s")),
    opt.Part("workload", Workload, only=("seed",)),
    opt.Part("scale", Scale),
)


@app.command("sim-sweep")
@opt.built_from(*SWEEP_PARTS)
def sim_sweep(
    given: Given,
    out: Annotated[
        Path, typer.Option(help="directory for the results (a subdirectory per load level)", parser=opt.out_path)
    ] = Path("runs/sweep"),
) -> None:
    """Multi-bin dynamic batching's experiments at its load levels: the grid (requests x GPUs x bins K), the
    comparison of batching methods (resumable CSVs), and its hypotheses H1-H3 with their verdicts; every
    simulation a dask task with --workers / --cluster (the same CSVs, byte for byte)."""
    from rich.progress import Progress

    from infermeter.config.sweep import sweep_plan
    from infermeter.distributed.tasks import task_map
    from infermeter.sim.experiments import STEP1_CSV, STEP2_CSV
    from infermeter.sim.sweep import HYPOTHESES_OF, SweepRequests, claim_sweep, run_level, sweep_hypotheses

    plan = sweep_plan(given, out)
    scale = Scale.from_options(given.get("scale", {}))
    requests = SweepRequests(plan)
    claim_sweep(plan, requests)
    with task_map(scale.workers, scale.cluster) as tasks, Progress(console=err) as bar:

        def track(label: str, total: int) -> Callable[[], None]:
            task = bar.add_task(label, total=total)
            return lambda: bar.advance(task)

        for name, place in plan.places().items() if plan.step != "hypotheses" else ():
            rows = run_level(plan, name, requests, track, tasks)
            if rows is not None:
                print(_step2_table(rows, name))
            print(f"results: {place / STEP1_CSV}, {place / STEP2_CSV}")
        if plan.step in HYPOTHESES_OF:
            _write_hypotheses(plan.out, sweep_hypotheses(plan, requests, track, tasks))


def _step2_table(rows: list[dict[str, str]], level: str) -> str:
    """Step 2's comparison of the batching methods at one load level."""
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
    return grid(header, body, f"Step 2: method comparison ({level} load)")


def _write_hypotheses(out: Path, report: HypothesisReport) -> None:
    """hypotheses.json and hypotheses.md in `out`, and the verdicts printed."""
    from infermeter.report.hypotheses import console, markdown
    from infermeter.sim.hypotheses import HYPOTHESES_JSON, HYPOTHESES_MD

    out.mkdir(parents=True, exist_ok=True)
    (out / HYPOTHESES_JSON).write_text(report.model_dump_json(indent=2))
    (out / HYPOTHESES_MD).write_text(markdown(report))
    print(console(report))
    print(f"report: {out / HYPOTHESES_MD}, {out / HYPOTHESES_JSON}")
