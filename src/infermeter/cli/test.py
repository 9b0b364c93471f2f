"""`infermeter test NAME`: the IETF draft's section 5 tests (and exo bench's grid) as suites, each a command whose
options are the target's, the monitors', the disclosures' and the suite's own setup parameters; `--list` names them."""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import app, err
from infermeter.config.scenario import Given
from infermeter.errors import UserError
from infermeter.python_api.suite import suite_fields
from infermeter.suites.registry import SUITES, get_suite

if TYPE_CHECKING:
    from infermeter.exports.spec import ExportSpec
    from infermeter.run_info import RunInfo
    from infermeter.suite_result import SuiteResult
    from infermeter.suites.framework import Suite

test_app = typer.Typer(
    add_completion=False,
    help="Run a test of the IETF draft's section 5 as a suite of runs, with its tables and compliance verdict: "
    "infermeter test NAME [--url URL] [--quick] [--out DIR] [options of the test]; --list names them.",
)
app.add_typer(test_app, name="test")

Quick = Annotated[
    bool,
    typer.Option(help="scale durations and counts down for a demonstration or CI; the verdict cannot be compliant"),
]

PER_RUN_HELP = {"warmup": "auto, N requests, or off (per run)"}
MAX_REPEATS = 1000
RepeatOption = Annotated[
    int | None,
    typer.Option(
        help="run the whole suite N times, each repeat a complete suite in OUT/repeat-1 ... OUT/repeat-N (resumable), "
        "and give each suite figure's mean and 95% CI over them; `infermeter compare` takes OUT as one system",
        parser=opt.integer(1, MAX_REPEATS),
    ),
]

SuiteDir = Annotated[
    Path | None,
    typer.Option(
        help="the suite's directory (default runs/test-NAME-YYYYmmdd-HHMMSS); a directory holding the same suite "
        "resumes it, reusing its finished runs",
        parser=opt.out_path,
    ),
]


@test_app.callback(invoke_without_command=True)
def tests(
    ctx: typer.Context,
    list_: Annotated[bool, typer.Option("--list", help="list the tests and exit")] = False,
) -> None:
    if list_:
        for name in SUITES:
            print(f"{name:<16} {get_suite(name).section:<5} {SUITES.describe(name)}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        print(ctx.get_help())
        raise typer.Exit()


def run_test(
    name: str,
    given: Given,
    quick: bool,
    out: Path | None,
    emulator_config: Path | None,
    scheduler: str | None,
    progress: bool,
    argv: list[str],
    html: Path | None = None,
    markdown: Path | None = None,
    repeat: int | None = None,
    export: list[ExportSpec] | None = None,
) -> None:
    """Build the suite's parameters and base configuration, run (or resume) it, print its report; with `repeat`,
    run it that many times, each repeat a suite directory of its own, and print the figures over the repeats.
    `export` sends each suite directory (each repeat's) at the end."""
    from infermeter.python_api import exporting
    from infermeter.python_api.suite import default_suite_dir, plan_suite
    from infermeter.report.suite import suite_report

    plan = plan_suite(name, given, quick, emulator_config, scheduler, shlex.join(["infermeter", *argv]))
    specs = export or []  # each checked as the option's value, before anything ran
    out = out or default_suite_dir(name)

    def one(where: Path) -> tuple[SuiteResult, list[RunInfo]]:
        """The suite run (or resumed) in `where`, then exported."""
        done = plan.run(where, progress, err)
        exporting.print_warnings(exporting.send_suite(specs, where))
        return done

    if repeat is None:
        result, infos = one(out)
        print(suite_report(result, infos))
        if html or markdown:
            from infermeter.cli.report import write_documents
            from infermeter.report.documents import suite_document

            write_documents(suite_document(result, infos), html, markdown)
        return
    _repeats(out, repeat, one, html, markdown)


def claim_repeats(out: Path) -> None:
    """Refuse an --out that holds anything but repeats of a suite (a run, a suite run without --repeat, other
    files), before anything is written."""
    from infermeter.records import holds_run
    from infermeter.suite_result import SUITE_SETTINGS
    from infermeter.suites.execute import repeat_dirs

    if holds_run(out) or (out / SUITE_SETTINGS).exists():
        what = "a single run" if holds_run(out) else "a suite run without --repeat"
        raise UserError(f"--out {out} holds {what}, not a suite's repeats: choose another directory")
    if out.is_dir() and set(out.iterdir()) - set(repeat_dirs(out)):
        raise UserError(f"--out {out} is not empty and holds no repeats of a suite: choose a new directory")


def _repeats(
    out: Path,
    repeat: int,
    one: Callable[[Path], tuple[SuiteResult, list[RunInfo]]],
    html: Path | None,
    markdown: Path | None,
) -> None:
    """The suite `repeat` times in OUT/repeat-K (each resumable), each report, then each figure over the repeats."""
    from infermeter.metrics.suite_comparison import numeric_figures, summarize_repeats
    from infermeter.report.suite import suite_report
    from infermeter.report.suite_comparison import repeats_document, repeats_text
    from infermeter.suites.execute import REPEAT

    claim_repeats(out)
    done = []
    for k in range(1, repeat + 1):
        err.print(f"repeat {k} of {repeat}: {out / f'{REPEAT}{k}'}")
        result, infos = one(out / f"{REPEAT}{k}")
        print(suite_report(result, infos))
        print()
        done.append((result, infos))
    headline = {k: v for r, _ in done for k, v in r.analysis.headline.items()}
    summaries = summarize_repeats([numeric_figures(r.analysis.figures) for r, _ in done], headline)
    print(repeats_text(summaries, repeat))
    if html or markdown:
        from infermeter.cli.report import write_documents

        write_documents(repeats_document(done, summaries), html, markdown)


def _command(name: str, suite: Suite) -> None:
    """Register `infermeter test NAME` with the suite's parameters as options."""
    parts = tuple(opt.Part(f.key, f.section, f.only, dict(f.defaults), PER_RUN_HELP) for f in suite_fields(suite))

    def command(
        given: Given,
        quick: Quick = False,
        out: SuiteDir = None,
        emulator_config: opt.EmulatorConfigFile = None,
        scheduler: opt.Scheduler = None,
        progress: opt.Progress = True,
        html: opt.Html = None,
        markdown: opt.Markdown = None,
        repeat: RepeatOption = None,
        export: opt.Exports = None,
    ) -> None:
        from infermeter.cli.main import invocation

        run_test(
            name, given, quick, out, emulator_config, scheduler, progress, invocation(), html, markdown, repeat, export
        )

    command.__doc__ = f"{suite.title} ({suite.reference}): {suite.summary}."
    if "repeat" in suite.params.model_fields:  # the suite's own --repeat (grid: runs of each cell) keeps the flag
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != "repeat"]
        opt.with_signature(command, signature.replace(parameters=kept))
    test_app.command(name=name)(opt.built_from(*parts)(command))


for _name in SUITES:
    if (_suite := SUITES.load(_name)) is not None:  # another package's suite that fails to import is left out, warned
        _command(_name, _suite)
