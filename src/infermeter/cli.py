"""The `infermeter` command: one entry point, a subcommand per job."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import numpy as np
import orjson
import typer
from rich.console import Console

from infermeter.errors import UserError
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.goodput import parse_slo
from infermeter.records import read_records, read_run_info
from infermeter.report.console import full_report
from infermeter.report.tables import grid
from infermeter.workload.arrivals import ArrivalKind
from infermeter.workload.build import arrival_spec, build_requests
from infermeter.workload.export import write_requests

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Benchmark LLM inference servers: exact latency metrics, user-experience scores, an engine wind tunnel.",
)
err = Console(stderr=True)


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run directory (run.json + records.parquet)")],
    json: Annotated[bool, typer.Option("--json", help="print summary.json instead of tables")] = False,
    itl_option: Annotated[
        str | None, typer.Option("--itl-option", help="A, B or C; default: the one run.json declares")
    ] = None,
    slo: Annotated[str | None, typer.Option(help="goodput SLO, e.g. ttft=200ms,tpot=50ms; default: run.json's")] = None,
) -> None:
    """Recompute and print the summary of any run directory (live, emulated or simulated)."""
    info = read_run_info(run_dir)
    option = (itl_option or info.itl_option).upper()
    if option not in ("A", "B", "C"):
        raise UserError(f"--itl-option must be A, B or C, got '{itl_option}'")
    bounds = parse_slo(slo) if slo is not None else dict(info.slo)
    summary = summarize(RecordColumns.from_table(read_records(run_dir)), option, bounds)  # type: ignore[arg-type]
    if json:
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
    else:
        print(full_report(summary, info))


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
    if arrival not in ArrivalKind.__args__:  # type: ignore[attr-defined]
        raise UserError(f"--arrival must be one of {', '.join(ArrivalKind.__args__)}, got '{arrival}'")  # type: ignore[attr-defined]
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


@app.command()
def run() -> None:
    """Benchmark a server (live runs arrive with the load-generation issue)."""
    print("infermeter run: live and emulated benchmark runs arrive with the load-generation work.")
    print("Available now: `infermeter workload NAME` to draw a workload, `infermeter report RUN_DIR` to summarize.")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2, never a traceback."""
    try:
        app(standalone_mode=False)
    except UserError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors carry their own message
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
