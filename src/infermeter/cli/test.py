"""`infermeter test NAME`: the IETF draft's section 5 tests (and exo bench's grid) as suites, each a command whose
options are the target's, the monitors', the disclosures' and the suite's own setup parameters; `--list` names them."""

from __future__ import annotations

import inspect
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import api_key, app, err
from infermeter.config.run import Disclosures, Load, Monitors, Scale, Target, Workload
from infermeter.config.scenario import Given
from infermeter.config.sections import DATASET_FIELDS
from infermeter.errors import UserError
from infermeter.suites.registry import SUITES, get_suite

if TYPE_CHECKING:
    from infermeter.run_info import RunInfo
    from infermeter.suite_result import SuiteResult
    from infermeter.suites.framework import Suite

test_app = typer.Typer(
    add_completion=False,
    help="Run a test of the IETF draft's section 5 as a suite of runs, with its tables and compliance verdict: "
    "infermeter test NAME [--url URL] [--quick] [--out DIR] [options of the test]; --list names them.",
)
app.add_typer(test_app, name="test")

QUICK_WARMUP = 4  # requests: --quick keeps a warm-up in every run, short enough for a demonstration
Quick = Annotated[
    bool,
    typer.Option(help="scale durations and counts down for a demonstration or CI; the verdict cannot be compliant"),
]

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
) -> None:
    """Build the suite's parameters and base configuration, run (or resume) it, print its report; with `repeat`,
    run it that many times, each repeat a suite directory of its own, and print the figures over the repeats."""
    from infermeter.config.scenario import run_config
    from infermeter.emulator.config import load_emulator_config
    from infermeter.report.suite import suite_report

    suite = get_suite(name)
    params = suite.params.build(given.pop("suite", {}), quick)
    load = given.setdefault("load", {})
    if quick:
        load.setdefault("warmup", QUICK_WARMUP)
    load["concurrency"] = 1  # a placeholder that makes the base a valid run: every run of a suite sets its own load
    base = run_config(None, given)
    api_key(base.target.api_key_env)
    if base.workload.dataset is not None:  # read once before anything starts: a bad file costs nothing
        from infermeter.workload.source import WorkloadSource

        rows = WorkloadSource.read(base.workload).size()
        per_run = getattr(params, "requests", None)
        if isinstance(per_run, int) and per_run > rows:
            raise UserError(
                f"--dataset {base.workload.dataset} has {rows} requests, fewer than the {per_run} each run of the "
                f"'{name}' test sends: give a larger dataset, or --requests {rows} or fewer"
            )
    emulator = None
    if base.target.url is None:
        emulator = load_emulator_config(emulator_config) if emulator_config else suite.emulator(params)
        emulator = emulator.with_scheduler(scheduler)
    out = out or Path("runs") / time.strftime(f"test-{name}-%Y%m%d-%H%M%S")
    settings: dict[str, Any] = {
        "suite": name,
        "quick": quick,
        "params": params.model_dump(mode="json"),
        "config": base.model_dump(mode="json", exclude={"scale"}),  # where it runs does not change what it measures
        "emulator": emulator.model_dump(mode="json") if emulator is not None else None,
    }
    command = shlex.join(["infermeter", *argv])

    def one(where: Path) -> tuple[SuiteResult, list[RunInfo]]:
        """The suite run (or resumed) in `where`, and its runs' run.json (as the lab read them)."""
        from infermeter.suites.execute import claim_suite_dir, execute
        from infermeter.suites.lab import Lab

        if claim_suite_dir(where, settings, f"'{name}' test"):
            err.print(f"resuming the '{name}' test in {where}: finished runs are reused")
        elif emulator is not None:
            err.print("starting the embedded emulator (no --url given)")
        with Lab(where, base, emulator, progress, err, quick) as lab:
            result = execute(suite, lab, params, quick, command)
        return result, [r.info for r in lab.runs]

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
    from infermeter.suites.execute import SETTINGS, repeat_dirs

    if holds_run(out) or (out / SETTINGS).exists():
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
    own = getattr(suite, "own_options", ())  # a shared option the suite takes per system of its own instead
    # a suite that sends a workload may send a dataset's requests instead (suites/lab.py with_dataset)
    takes = getattr(suite, "takes_dataset", "workload" in suite.params.model_fields)
    dataset_options = DATASET_FIELDS if takes else ()
    parts = (
        opt.Part("target", Target),
        opt.Part("workload", Workload, only=("tokenizer", "seed", *dataset_options)),
        opt.Part("load", Load, only=("warmup",), help={"warmup": "auto, N requests, or off (per run)"}),
        opt.Part("monitors", Monitors),
        opt.Part("disclosures", Disclosures, only=tuple(n for n in Disclosures.model_fields if n not in own)),
        opt.Part("scale", Scale),
        opt.Part("suite", suite.params),
    )

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
    ) -> None:
        from infermeter.cli.main import invocation

        run_test(name, given, quick, out, emulator_config, scheduler, progress, invocation(), html, markdown, repeat)

    command.__doc__ = f"{suite.title} (IETF draft, section {suite.section}): {suite.summary}."
    if "repeat" in suite.params.model_fields:  # the suite's own --repeat (grid: runs of each cell) keeps the flag
        signature = inspect.signature(command, eval_str=True)
        kept = [p for p in signature.parameters.values() if p.name != "repeat"]
        opt.with_signature(command, signature.replace(parameters=kept))
    test_app.command(name=name)(opt.built_from(*parts)(command))


for _name in SUITES:
    if (_suite := SUITES.load(_name)) is not None:  # another package's suite that fails to import is left out, warned
        _command(_name, _suite)
