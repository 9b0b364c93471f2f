"""`infermeter report`: the tables of one run directory, or a comparison of several."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app, err
from infermeter.errors import UserError
from infermeter.suite_result import SUITE_JSON

if TYPE_CHECKING:
    from infermeter.metrics.latency import ItlOption
    from infermeter.metrics.summary_model import Summary
    from infermeter.report.document import Document
    from infermeter.run_info import RunInfo

ITL_OPTIONS: tuple[ItlOption, ...] = ("A", "B", "C")


@app.command()
def report(
    run_dirs: Annotated[list[Path], typer.Argument(help="one run directory, or several to compare side by side")],
    json: Annotated[bool, typer.Option("--json", help="print summary.json instead of tables")] = False,
    itl_option: Annotated[
        str | None,
        typer.Option(
            "--itl-option", help="A, B or C; default: the one run.json declares", parser=opt.choice(*ITL_OPTIONS)
        ),
    ] = None,
    slo: opt.Slo = None,
    deadlines: opt.Deadlines = None,
    html: opt.Html = None,
    markdown: opt.Markdown = None,
) -> None:
    """Recompute and print the summary of any run directory (live, emulated or simulated), or print a test suite's
    report again; --html / --markdown also write the full report with its plots."""
    from infermeter.metrics import RecordColumns
    from infermeter.metrics.goodput import parse_slo
    from infermeter.metrics.summary import summary_of_run
    from infermeter.records import NOT_RECORDED, is_sealed, read_run_info

    if len(run_dirs) == 1 and (run_dirs[0] / SUITE_JSON).is_file():
        _suite_report(run_dirs[0], html, markdown)
        return
    if (html or markdown) and len(run_dirs) > 1:
        raise UserError(
            "--html and --markdown write the report of one run or suite: compare several with "
            "infermeter compare DIR... --html FILE"
        )
    results: list[tuple[Path, RunInfo, Summary]] = []
    option = next((o for o in ITL_OPTIONS if o == itl_option), None)
    bounds = parse_slo(slo) if slo is not None else None
    for run_dir in run_dirs:
        with about("run_dirs"):  # the records are read as the metrics need them: damage shows here
            info = read_run_info(run_dir)
            cols = RecordColumns.of_run(run_dir, info)
            summary = summary_of_run(run_dir, info, cols, option, bounds, deadlines)
        if not is_sealed(run_dir):
            lost = int(sum(e.startswith(NOT_RECORDED) for e in cols.error.tolist()))
            info.notes.append(
                f"this run never closed (its process was killed or its disk filled): {cols.n} requests read from "
                f"its journal, {lost} of them sent with no outcome recorded"
            )
        results.append((run_dir, info, summary))
        last_cols = cols
    if json:
        import orjson

        payload: dict[str, Any] = (
            results[0][2].model_dump(mode="json")
            if len(results) == 1
            else {str(d): s.model_dump(mode="json") for d, _, s in results}
        )
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    from infermeter.report.console import comparison_table, full_report, sim_table
    from infermeter.report.endpoint import measured_line

    if len(results) > 1:
        for d, run_info, _ in results:  # the endpoint each run measured, above the table of them
            if (line := measured_line(run_info)) is not None:
                print(f"{d.name or d}: {line}")
        print(comparison_table([(d.name or str(d), s) for d, _, s in results]))
        return
    run_dir, info, summary = results[0]
    print(full_report(summary, info))
    if summary.sim is not None:
        print()
        print(sim_table(summary))
    if html or markdown:
        from infermeter.report.documents import run_document

        with about("run_dirs"):
            doc = run_document(run_dir, info, summary, last_cols)
        write_documents(doc, html, markdown)


def write_documents(doc: Document, html: Path | None, markdown: Path | None) -> None:
    """Write the report's HTML and Markdown files where asked, and say where."""
    from infermeter.report.html import write_report

    for path, is_markdown in ((html, False), (markdown, True)):
        if path is not None:
            write_report(doc, path, is_markdown)
            err.print(f"{'Markdown' if is_markdown else 'HTML'} report written to {path}")


def _suite_report(suite_dir: Path, html: Path | None, markdown: Path | None) -> None:
    """A finished suite's report again, from its suite.json and its runs' run.json."""
    from infermeter.records import read_run_info
    from infermeter.report.documents import suite_document
    from infermeter.report.suite import suite_report
    from infermeter.suites.execute import load_result, suite_run_dirs

    with about("run_dirs"):
        result = load_result(suite_dir)
        infos = [read_run_info(path) for path in suite_run_dirs(suite_dir, result).values()]
    print(suite_report(result, infos))
    if html or markdown:
        write_documents(suite_document(result, infos), html, markdown)
