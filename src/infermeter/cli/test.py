"""`infermeter test NAME`: the IETF draft's section 5 tests (and exo bench's grid) as suites, each a command whose
options are the target's, the monitors', the disclosures' and the suite's own setup parameters; `--list` names them."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from infermeter.cli import options as opt
from infermeter.cli.app import api_key, app, err
from infermeter.config.run import Disclosures, Load, Monitors, Scale, Target, Workload
from infermeter.config.scenario import Given
from infermeter.suites.registry import SUITES, get_suite

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
        for name, (_, section, line) in SUITES.items():
            print(f"{name:<16} {section:<5} {line}")
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
) -> None:
    """Build the suite's parameters and base configuration, run (or resume) it, print its report."""
    from infermeter.config.scenario import run_config
    from infermeter.emulator.config import load_emulator_config
    from infermeter.records import read_run_info
    from infermeter.report.suite import suite_report
    from infermeter.suites.execute import claim_suite_dir, execute
    from infermeter.suites.lab import Lab

    suite = get_suite(name)
    params = suite.params.build(given.pop("suite", {}), quick)
    load = given.setdefault("load", {})
    if quick:
        load.setdefault("warmup", QUICK_WARMUP)
    load["concurrency"] = 1  # a placeholder that makes the base a valid run: every run of a suite sets its own load
    base = run_config(None, given)
    api_key(base.target.api_key_env)
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
    if claim_suite_dir(out, settings, f"'{name}' test"):
        err.print(f"resuming the '{name}' test in {out}: finished runs are reused")
    elif emulator is not None:
        err.print("starting the embedded emulator (no --url given)")
    with Lab(out, base, emulator, progress, err, quick) as lab:
        result = execute(suite, lab, params, quick, shlex.join(["infermeter", *argv]))
    infos = [read_run_info(Path(r.run_dir)) for r in result.runs]
    print(suite_report(result, infos))
    if html or markdown:
        from infermeter.cli.report import write_documents
        from infermeter.report.documents import suite_document

        write_documents(suite_document(result, infos), html, markdown)


def _command(name: str) -> None:
    """Register `infermeter test NAME` with the suite's parameters as options."""
    suite = get_suite(name)
    parts = (
        opt.Part("target", Target),
        opt.Part("workload", Workload, only=("tokenizer", "seed")),
        opt.Part("load", Load, only=("warmup",), help={"warmup": "auto, N requests, or off (per run)"}),
        opt.Part("monitors", Monitors),
        opt.Part("disclosures", Disclosures),
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
    ) -> None:
        from infermeter.cli.main import invocation

        run_test(name, given, quick, out, emulator_config, scheduler, progress, invocation(), html, markdown)

    command.__doc__ = f"{suite.title} (IETF draft, section {suite.section}): {suite.summary}."
    test_app.command(name=name)(opt.built_from(*parts)(command))


for _name in SUITES:
    _command(_name)
