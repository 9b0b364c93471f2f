"""`infermeter runs`: the catalog of run and suite directories in DuckDB (`runs list`, the default), a metric's trend
over time (`runs trend`), and the regression check of the newest runs for CI (`runs check`, exit 1 on a regression
or when nothing could be verified)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from infermeter.catalog.groups import GROUPINGS
from infermeter.cli import options as opt
from infermeter.cli.app import about, app, err
from infermeter.errors import UserError

if TYPE_CHECKING:
    from infermeter.catalog.groups import Series
    from infermeter.catalog.index import Catalog
    from infermeter.catalog.names import Metric

DEFAULT_COMMAND = "list"
MAX_SHARE = 10.0  # --max-regression: 1000% is the most a check may allow


class RunsGroup(TyperGroup):
    """`infermeter runs DIR...` is `infermeter runs list DIR...`: a first argument that names no subcommand (nor
    asks for help) starts the default one."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [DEFAULT_COMMAND, *args]
        return list(super().parse_args(ctx, args))


runs_app = typer.Typer(
    cls=RunsGroup,
    add_completion=False,
    no_args_is_help=True,
    help="A catalog of run and suite directories in DuckDB: query it with SQL, draw a metric's trend over time, or "
    "check the newest runs for a significant regression (for CI).\n\n"
    "infermeter runs DIR... is infermeter runs list DIR...: every run under the directories (at any depth, suites' "
    "runs included) in a table `runs` (one row per run) and a view `requests` (every request), read in place.",
)
app.add_typer(runs_app, name="runs")


def share(value: Any) -> float:
    """--max-regression: a percentage such as 5% (as a fraction, 0.05), from 0% to 1000%; a fraction given as a
    number (the default) passes as it is."""
    if isinstance(value, float):
        return value
    text = str(value).strip()
    if not text.endswith("%"):
        raise ValueError(f"expected a percentage such as 5%, got {str(value)!r}")
    try:
        x = float(text[:-1]) / 100
    except ValueError:
        raise ValueError(f"expected a percentage such as 5%, got {str(value)!r}") from None
    if not math.isfinite(x) or not 0 <= x <= MAX_SHARE:
        raise ValueError(f"must be a percentage from 0% to {MAX_SHARE:.0%}, got {str(value)!r}")
    return x


def baseline_dir(value: Any) -> str:
    """--baseline: `last`, or a directory that exists (its runs are the baseline)."""
    text = str(value)
    if text == "last":
        return text
    if not text.strip():
        raise ValueError("is empty: give last, or a directory holding the baseline's runs")
    path = Path(text)
    if not path.exists():
        raise ValueError(f"{text}: no such directory (give last, or a directory holding the baseline's runs)")
    if not path.is_dir():
        raise ValueError(f"{text} is a file: give last, or a directory holding the baseline's runs")
    return text


Dirs = Annotated[
    list[Path],
    typer.Argument(
        help="run directories, or directories holding them at any depth (suites and their repeats included)",
        show_default=False,
    ),
]
HtmlFile = Annotated[
    Path | None,
    typer.Option("--html", help="also write the result as one offline HTML file", parser=opt.report_file),
]
By = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="one series per value of this column of the runs table (sut_model, or sut.model; kind, load_rate, ...)",
    ),
]
Grouping = Annotated[
    str,
    typer.Option(
        "--group",
        help="dir: the runs in one directory form a group, one point (a CI job's repeats), a suite's runs by their "
        "key across its repeats; run: each run is a group of its own",
        parser=opt.choice(*GROUPINGS),
    ),
]


def _catalog(dirs: list[Path]) -> Catalog:
    """The runs under the directories in DuckDB; each damaged run a warning line on stderr, skipped; no readable run
    at all is an error."""
    from infermeter.catalog.entry import read_run
    from infermeter.catalog.find import Problem, find_runs
    from infermeter.catalog.index import Catalog

    with about("dirs"):
        found = find_runs(dirs)
        runs, skipped = [], []
        for f in found.runs:
            try:
                runs.append(read_run(f))
            except UserError as exc:
                skipped.append(Problem(f.path, str(exc)))
        if not runs:
            first = skipped[0]
            more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
            raise UserError(f"no run could be read: {first.text()}{more}")
    for problem in [*found.problems, *skipped]:
        err.print(problem.line(), markup=False, highlight=False, soft_wrap=True)
    return Catalog(runs)


def _series(catalog: Catalog, by: str | None, group: str) -> list[Series]:
    """The catalog's runs as series of groups (`--by`, `--group`)."""
    from infermeter.catalog.groups import series_of
    from infermeter.catalog.names import known_metrics, resolve_column

    how = next(g for g in GROUPINGS if g == group)
    if by is None:
        return series_of(catalog.runs, how)
    figures = {m.column for m in known_metrics(catalog.runs).values()}
    try:
        column = resolve_column(by, [c for c in catalog.columns() if c not in figures])
    except UserError as exc:
        raise UserError(f"--by: {exc}") from None
    return series_of(catalog.runs, how, column, catalog.values(column))


def _metric(name: str, catalog: Catalog) -> Metric:
    """The metric --metric names; one no run measured is an error listing those they did."""
    from infermeter.catalog.names import known_metrics, resolve_metric

    try:
        return resolve_metric(name, known_metrics(catalog.runs))
    except UserError as exc:
        raise UserError(f"--metric: {exc}") from None


def _metrics(names: list[str] | None, catalog: Catalog) -> list[Metric]:
    """The metrics --metric names (repeated, or comma-separated), each once; without any, the defaults the runs
    measured."""
    from infermeter.catalog.check import DEFAULT_METRICS
    from infermeter.catalog.names import known_metrics

    if names is None:
        known = known_metrics(catalog.runs)
        names = [m for m in DEFAULT_METRICS if m in known]
        if not names:
            raise UserError(f"--metric: the runs measured none of {', '.join(DEFAULT_METRICS)}: name the metrics")
    out: dict[str, Metric] = {}
    for name in (n for text in names for n in text.split(",")):
        metric = _metric(name, catalog)
        out.setdefault(metric.name, metric)
    return list(out.values())


@runs_app.command("list")
def list_runs(
    dirs: Dirs,
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            help="print this query's result instead of the runs: tables `runs` (one row per run: its id, suite, "
            "kind, started_at, the SUT's and configuration's keys such as sut_model and load_rate, every headline "
            "figure such as ttft_p99_ms) and `requests` (every request's record, with run_id); a query that reads "
            "only: SELECT (WITH, FROM, VALUES), DESCRIBE, SUMMARIZE, SHOW or EXPLAIN",
        ),
    ] = None,
    html: HtmlFile = None,
) -> None:
    """Index the runs under DIR... in DuckDB and print them as a table, or the result of --sql QUERY.

    A damaged run is named on stderr and skipped; the rest are indexed.
    Nothing is copied: records are read from each records.parquet in place, figures from summary.json.
    A query may only read: COPY, INSTALL, ATTACH, CREATE, SET, PRAGMA and the like are refused before anything runs.
    A run that left no summary.json has its summary recomputed from its records (the runs table's note says so).
    A run that never closed (its journal only) is in the runs table but not in the requests view."""
    from infermeter.report.catalog_table import query_document, query_text

    catalog = _catalog(dirs)
    query = sql if sql is not None else catalog.overview()
    try:
        result = catalog.query(query)
    except UserError as exc:
        raise UserError(f"--sql: {exc}") from None
    caption = f"{len(result.rows)} row(s) of {len(catalog.runs)} run(s)" if sql else f"{len(catalog.runs)} run(s)"
    print(query_text(result, caption))
    if html is not None:
        from infermeter.report.html import write_report

        notes = [f"{r.run_id}: {n}" for r in catalog.runs for n in r.notes]
        write_report(query_document(result, caption, query, notes), html)
        err.print(f"HTML table written to {html}", markup=False, highlight=False)


@runs_app.command("trend")
def trend_runs(
    dirs: Dirs,
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            help="a headline figure: ttft.p99, tpot.mean, e2e.p50, throughput.output_tok_s, goodput.req_s, ... (or "
            "its column name, ttft_p99_ms)",
        ),
    ] = "ttft.p99",
    by: By = None,
    group: Grouping = "dir",
    html: HtmlFile = None,
) -> None:
    """Draw a metric over time, each group of runs a point with its 95% CI, and mark its significant changes.

    A change from one group to the next is marked where it is at least 5% of the value before and significant.
    Significance follows infermeter compare (the IETF draft's section 6.3), Holm-corrected across a series' changes.
    A latency's CI and test come from a hierarchical bootstrap (runs drawn, then each drawn run's requests).
    A single run's CI covers its requests only: the table's CI over column says which.
    The success rate is tested on the pooled requests' outcomes (Fisher's exact test).
    A run's figure (throughput) is tested by Welch's t over the runs (not verifiable with one run a group).
    A group is as infermeter runs check --help says."""
    from infermeter.catalog.evidence import Samples
    from infermeter.catalog.trend import trend
    from infermeter.report.catalog_trend import trend_document, trend_text

    catalog = _catalog(dirs)
    chosen = _metric(metric, catalog)
    series = _series(catalog, by, group)
    with about("dirs"):
        result = trend(chosen, series, Samples())
    print(trend_text(result))
    if html is not None:
        from infermeter.report.html import write_report

        write_report(trend_document(result), html)
        err.print(f"HTML report written to {html}", markup=False, highlight=False)


@runs_app.command("check")
def check_runs(
    dirs: Dirs,
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline",
            help="last: each series' newest group is held against the group before it; or a directory: against "
            "the runs under it",
            parser=opt.parser(baseline_dir),
        ),
    ] = "last",
    max_regression: Annotated[
        float,
        typer.Option(
            "--max-regression",
            help="the change in the worse direction allowed, relative to the baseline, as a percentage: a regression "
            "is a significant change whose whole 95% CI lies beyond it",
            parser=opt.parser(share),
            show_default="5%",
        ),
    ] = 0.05,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="repeatable (or comma-separated): the headline figures to check; default: ttft.p50, ttft.p99, "
            "tpot.p50, tpot.p99, e2e.p99, throughput.output_tok_s and requests.success_rate, those the runs measured",
        ),
    ] = None,
    by: By = None,
    group: Grouping = "dir",
) -> None:
    """Check the newest runs against a baseline for CI: exit 1 on a regression or when nothing could be verified.

    A group (--group dir) is the runs in one directory: a CI job writes its repeats into a directory of their own.
    A suite's runs form a group by their key in its plan, across the suite's repeats (infermeter test --repeat).
    With --group run each run is a group of its own.  In each series (--by) the newest group is the candidate.
    A metric regressed when its test rejects after Holm's correction (the IETF draft's section 6.3)
    and the whole 95% CI of its change in the worse direction, relative to the baseline, lies beyond --max-regression.
    With two or more runs a group, the CI and the test include run-to-run variation (a hierarchical bootstrap).
    A metric the baseline measured and the candidate did not (its requests all failed) is a regression too.
    The success rate is tested on the pooled requests' outcomes (Fisher's exact test): one run a group suffices.
    With one run a group, a run's figure (throughput) is not verifiable.
    Exit 0 when no metric regressed and at least one could be verified; 1 otherwise (the gate fails closed)."""
    from infermeter.catalog.check import check, last_pairs, pairs_against
    from infermeter.catalog.evidence import Samples
    from infermeter.catalog.find import run_dirs_under
    from infermeter.report.catalog_check import check_text

    base = None if baseline == "last" else Path(baseline)
    base_paths: set[Path] = set()
    if base is not None:
        with about("--baseline"):
            base_paths = {p.resolve() for p in run_dirs_under(base)}
            if not base_paths:
                raise UserError(f"{base} holds no run: give a directory holding the baseline's runs")
    catalog = _catalog([*dirs, base] if base is not None else dirs)
    metrics = _metrics(metric, catalog)
    series = _series(catalog, by, group)
    if base is None:
        pairs, notes = last_pairs(series)
        if not pairs:
            ways = (
                "(a directory each), or --baseline DIR"
                if group == "run"
                else "(a directory each), --group run, or --baseline DIR"
            )
            raise UserError(
                "the runs form one group" + (" in each series" if len(series) > 1 else "") + ": there is no earlier "
                f"group to hold the newest against; give the runs of two or more groups {ways}"
            )
    else:
        pairs, notes = pairs_against(series, lambda r: r.path.resolve() in base_paths, str(base))
        if not pairs:
            raise UserError(f"--baseline {base}: {notes[0] if notes else 'no run to check against it'}")
    with about("dirs"):
        result = check(pairs, metrics, max_regression, Samples())
    result.notes += notes
    print(check_text(result))
    if result.failed:
        raise typer.Exit(1)
