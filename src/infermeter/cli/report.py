"""`infermeter report`: the tables of one run directory, or a comparison of several."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app
from infermeter.metrics import RecordColumns, summarize
from infermeter.metrics.fluidity import parse_deadlines
from infermeter.metrics.goodput import parse_slo
from infermeter.records import (
    NOT_RECORDED,
    SUMMARY,
    RunInfo,
    is_sealed,
    read_records,
    read_run_info,
)
from infermeter.report.console import comparison_table, full_report, sim_table


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
    results = []
    for run_dir in run_dirs:
        with about("run_dirs"):
            info = read_run_info(run_dir)
            cols = RecordColumns.from_table(read_records(run_dir))
        option = itl_option or info.itl_option
        bounds = parse_slo(slo) if slo is not None else dict(info.slo)
        spec = deadlines if deadlines is not None else getattr(info, "deadlines", None)
        summary = summarize(cols, option, bounds, parse_deadlines(spec) if spec else None)  # type: ignore[arg-type]
        summary.update(_stored_blocks(run_dir, info))
        if not is_sealed(run_dir):
            lost = int(sum(e.startswith(NOT_RECORDED) for e in cols.error.tolist()))
            info.notes.append(
                f"this run never closed (its process was killed or its disk filled): {cols.n} requests read from "
                f"its journal, {lost} of them sent with no outcome recorded"
            )
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
    except (orjson.JSONDecodeError, OSError):
        return {}
    if not isinstance(stored, dict):
        return {}
    keys = ["sim", "server_metrics", "energy"]
    if getattr(info, "token_times", "full") == "endpoints":
        keys += ["itl_ms", "jitter_ms", "max_pause_ms", "itl_source", "fluidity"]
    return {k: stored[k] for k in keys if k in stored}
