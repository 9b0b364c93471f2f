"""`infermeter export`: a run's requests as a table file, one row per request with every per-request metric."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app, err
from infermeter.config import checks
from infermeter.errors import UserError
from infermeter.exports.table_files import FORMATS, LIST_FORMATS, table_format, write_table
from infermeter.suite_result import SUITE_JSON

if TYPE_CHECKING:
    from infermeter.exports.request_rows import RunSource


def export_file(value: Any) -> Path:
    """--out: a file to write, in a directory that exists, never a directory itself or a file of a run or suite."""
    path = checks.report_file(value)
    if not path.parent.is_dir():
        raise ValueError(f"{path}: the directory {path.parent} does not exist")
    return path


@app.command()
def export(
    run_dir: Annotated[
        Path,
        typer.Argument(
            help="a run directory; or a test suite's directory (suite.json), or a directory holding run directories "
            "at any depth: every run's rows, with a first column `run` saying whose"
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="csv (no list columns), jsonl (with each token's time) or parquet; default: from --out's suffix "
            "(.csv, .jsonl, .parquet), else csv",
            parser=opt.choice(*FORMATS),
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="the file to write; default: standard output (CSV and JSONL only)",
            parser=opt.parser(export_file),
        ),
    ] = None,
) -> None:
    """Write a run's requests, one row per request with every per-request metric, as CSV, JSONL (with each token's
    time) or Parquet.

    Every request is a row: failed ones (with the error and its reason) and a --ramp-up's (flagged ramp_up) too.
    Columns: the record's fields, times in seconds on the run's clock, and each metric with its unit in its name.
    Metrics follow run.json as infermeter report does: its ITL option, token counting, SLO and deadlines.
    A metric that does not apply (a failed request, a one-body embeddings reply) is empty (null), never 0.
    JSONL rows also hold lists: token_times_ms, server_token_times_ms (ms after submission) and itl_ms.
    Parquet keeps those lists as list columns; CSV leaves them out."""
    from infermeter.exports.request_rows import export_rows

    fmt = table_format(format, out)
    with about("run_dir"):  # the records are read as the metrics need them: damage shows here
        rows = export_rows(runs_in(run_dir), lists=fmt in LIST_FORMATS)
    for note in rows.notes:
        err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    write_table(rows.table, fmt, out)
    if out is not None:
        err.print(f"{rows.table.num_rows} requests written to {out} ({fmt})", markup=False, highlight=False)


def runs_in(path: Path) -> list[RunSource]:
    """The runs a path names: itself (it has run.json), a test suite's runs by their keys (suite.json, its runs
    found where suites.execute finds them), or the run directories under it at any depth (as `infermeter runs` finds
    them), each by its path from there; a one-line error when it names none."""
    from infermeter.catalog.find import run_dirs_under
    from infermeter.exports.request_rows import RunSource
    from infermeter.records import RUN_JSON

    if not path.exists():
        raise UserError(f"{path}: no such run directory")
    if not path.is_dir():
        raise UserError(f"{path} is a file: give a run directory, a suite's directory or a directory of runs")
    if (path / RUN_JSON).exists():
        return [RunSource(path)]
    if (path / SUITE_JSON).exists():
        return _suite_runs(path)
    found = [RunSource(d, d.relative_to(path).as_posix()) for d in run_dirs_under(path)]
    if not found:
        raise UserError(f"{path} is not a run directory: it has no {RUN_JSON}, no {SUITE_JSON}, and no run inside")
    return found


def _suite_runs(suite_dir: Path) -> list[RunSource]:
    """A suite's runs by their keys, in suite.json's order; a run that is not there is a one-line error."""
    from infermeter.exports.request_rows import RunSource
    from infermeter.suites.execute import load_result, suite_run_dirs

    result = load_result(suite_dir)
    found = suite_run_dirs(suite_dir, result)
    for ref in result.runs:
        if ref.key not in found:
            raise UserError(f"{suite_dir / SUITE_JSON} names the run {ref.key} at {ref.run_dir}, which is not there")
    return [RunSource(found[ref.key], ref.key) for ref in result.runs]
