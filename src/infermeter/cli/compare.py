"""`infermeter compare`: runs or suites of several systems held against a baseline (the IETF draft's section 6):
groups of repeated runs, equivalence findings, significance per metric, and the full report in HTML or Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import about, app
from infermeter.errors import UserError

Reps = opt.integer(200, 100_000)


def _read_run(path: Path):  # type: ignore[no-untyped-def]
    """A run directory as the comparison reads it (its summary recomputed from the records, as `report` does)."""
    from infermeter.cli.report import _stored_blocks, _stored_summary
    from infermeter.metrics import RecordColumns, summarize
    from infermeter.metrics.comparison import Run
    from infermeter.records import read_run_info

    info = read_run_info(path)
    cols = RecordColumns.of_run(path, info)
    summary = summarize(cols, info.itl_option, dict(info.slo), None)
    _stored_blocks(summary, _stored_summary(path), info)
    return Run.read(path, info, summary, cols)


def _inputs(dirs: list[Path]) -> dict[str, list[tuple[Path, str | None]]]:
    """Run directories to compare, each with its group when the command line names it, keyed by the suite run they
    stand for ("" for plain runs).  A run directory is grouped with the runs of its configuration; a directory of run
    directories is one group (repeats kept apart from other repeats of the same configuration); a suite directory
    gives each of its runs under its key, so suites of several systems are compared load level by load level."""
    from infermeter.records import RUN_JSON
    from infermeter.suites.execute import load_result
    from infermeter.suites.framework import SUITE_JSON

    keyed: dict[str, list[tuple[Path, str | None]]] = {}
    for d in dirs:
        if (d / SUITE_JSON).is_file():
            for ref in load_result(d).runs:
                keyed.setdefault(f"{ref.key}: {ref.label}", []).append((Path(ref.run_dir), str(d)))
        elif (d / RUN_JSON).is_file():
            keyed.setdefault("", []).append((d, None))
        elif d.is_dir() and (inner := sorted(p for p in d.iterdir() if (p / RUN_JSON).is_file())):
            keyed.setdefault("", []).extend((p, str(d)) for p in inner)
        else:
            raise UserError(
                f"{d} holds no run: give run directories (infermeter run), directories of them, or suite directories"
            )
    return keyed


@app.command()
def compare(
    dirs: Annotated[
        list[Path], typer.Argument(help="run directories (repeats of a configuration are grouped) or suite directories")
    ],
    baseline: Annotated[
        Path | None, typer.Option(help="a directory of the baseline group (default: the first)")
    ] = None,
    strict: Annotated[bool, typer.Option(help="refuse (exit 2) when the runs fail a 6.1 equivalence check")] = False,
    reps: Annotated[int, typer.Option(help="bootstrap replicates per CI", parser=Reps)] = 2000,
    html: opt.Html = None,
    markdown: opt.Markdown = None,
) -> None:
    """Compare systems as the IETF draft's section 6 asks: equivalence, repeated runs with 95% CIs, and a test with a
    multiple-comparison correction for every difference."""
    from infermeter.cli.report import write_documents
    from infermeter.metrics.comparison import compare as compare_groups
    from infermeter.metrics.comparison import group_runs
    from infermeter.report.comparison import comparison_document, comparison_text

    with about("dirs"):
        keyed = _inputs(dirs)
    if baseline is not None and not _among(baseline, [d for paths in keyed.values() for d, _ in paths], dirs):
        raise UserError(f"--baseline {baseline} is none of the compared runs or directories: give one of them")
    with about("dirs"):
        runs = {key: [(_read_run(p), hint) for p, hint in paths] for key, paths in keyed.items()}
    comparisons = []
    for key, found in runs.items():
        groups = group_runs([r for r, _ in found], [hint for _, hint in found])
        if len(groups) < 2:
            raise UserError(
                f"{len(found)} run(s){' for ' + key if key else ''} form one group: give runs of at least two "
                "configurations, or a directory of runs per group"
            )
        picked = [g for g in groups if baseline is not None and any(_among(baseline, [r.path], dirs) for r in g.runs)]
        base = picked[0] if picked else groups[0]
        comparisons.append((key, compare_groups(groups, base, reps)))
    for key, c in comparisons:
        print(comparison_text(c, key))
        print()
    if html or markdown:
        write_documents(comparison_document(comparisons), html, markdown)
    failed = [f for _, c in comparisons for f in c.equivalence if f.must and not f.met]
    if strict and failed:
        raise UserError(
            f"--strict: the runs are not equivalent (draft 6.1): {failed[0].text.lower()} not met ({failed[0].reason})"
        )


def _among(baseline: Path, runs: list[Path], dirs: list[Path]) -> bool:
    """Whether --baseline names one of these runs, or a directory given on the command line that holds one."""
    b = baseline.resolve()
    given = {d.resolve() for d in dirs}
    return any(b == r.resolve() or (b in given and b in r.resolve().parents) for r in runs)
