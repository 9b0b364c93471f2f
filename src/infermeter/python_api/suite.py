"""`test`: one of the IETF draft's section 5 tests (or exo bench's grid) run as a suite of runs, as `infermeter test
NAME` runs it; the command and the Python API share the options a suite takes, its plan and its execution."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike, fspath
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infermeter.config.run import RunConfig
from infermeter.config.section import Given
from infermeter.config.sections import DATASET_FIELDS, Disclosures, Load, Monitors, Scale, Target, Workload
from infermeter.errors import UserError
from infermeter.exports.spec import ExportSpec
from infermeter.python_api.options import Fields, checked, emulator_options, given_from, output_path
from infermeter.python_api.preflight import Voice, api_key, option_text, refuse_running_loop

if TYPE_CHECKING:
    from rich.console import Console

    from infermeter.emulator.config import EmulatorConfig
    from infermeter.run_info import RunInfo
    from infermeter.suite_result import SuiteResult
    from infermeter.suites.framework import Suite, SuiteParams

QUICK_WARMUP = 4  # requests: a quick suite keeps a warm-up in every run, short enough for a demonstration
OWN = ("quick", "out", "emulator_config", "scheduler", "progress", "report", "html", "markdown", "export")


def suite_fields(suite: Suite) -> tuple[Fields, ...]:
    """The options a suite takes: the target's, the tokenizer and seed (and a dataset's, for a suite that sends a
    workload: suites/lab.py with_dataset), the warm-up, the monitors', the disclosures', where it runs, and its own
    setup parameters (`suite.params`)."""
    own = getattr(suite, "own_options", ())  # a shared option the suite takes per system of its own instead
    takes = getattr(suite, "takes_dataset", "workload" in suite.params.model_fields)
    dataset_options = DATASET_FIELDS if takes else ()
    return (
        Fields("target", Target),
        Fields("workload", Workload, only=("tokenizer", "seed", *dataset_options)),
        Fields("load", Load, only=("warmup",)),
        Fields("monitors", Monitors),
        Fields("disclosures", Disclosures, only=tuple(n for n in Disclosures.model_fields if n not in own)),
        Fields("scale", Scale),
        Fields("suite", suite.params),
    )


@dataclass(frozen=True)
class SuitePlan:
    """A suite ready to run: its parameters, the base configuration of its runs (target, tokenizer, seed, monitors,
    disclosures), the embedded emulator's configuration when no URL was given, and the command recorded with it."""

    name: str
    suite: Suite
    params: SuiteParams
    base: RunConfig
    emulator: EmulatorConfig | None
    quick: bool
    command: str
    voice: Voice = "command"  # whom its messages name options for: the command line, or a Python caller

    def settings(self) -> dict[str, Any]:
        """What the runs are measured under: a directory holding a suite resumes only with the same settings."""
        return {
            "suite": self.name,
            "quick": self.quick,
            "params": self.params.model_dump(mode="json"),
            "config": self.base.model_dump(mode="json", exclude={"scale"}),  # where it runs changes nothing measured
            "emulator": self.emulator.model_dump(mode="json") if self.emulator is not None else None,
        }

    def run(self, where: Path, progress: bool, console: Console) -> tuple[SuiteResult, list[RunInfo]]:
        """The suite run (or resumed, reusing its finished runs) in `where`, and its runs' run.json; what it does is
        said on `console`.  suite.json is written before it returns."""
        from infermeter.python_api.endpoint import STARTING
        from infermeter.suites.execute import claim_suite_dir, execute
        from infermeter.suites.lab import Lab

        if claim_suite_dir(where, self.settings(), f"'{self.name}' test", option_text("out", where, self.voice)):
            console.print(f"resuming the '{self.name}' test in {where}: finished runs are reused")
        elif self.emulator is not None:
            console.print(STARTING)
        with Lab(where, self.base, self.emulator, progress, console, self.quick) as lab:
            result = execute(self.suite, lab, self.params, self.quick, self.command)
        return result, [r.info for r in lab.runs]


def plan_suite(
    name: str,
    given: Given,
    quick: bool,
    emulator_config: Path | None,
    scheduler: str | None,
    command: str,
    voice: Voice = "command",
) -> SuitePlan:
    """The suite's parameters (with --quick's where none was given) and base configuration, checked before anything
    starts: the API key's variable, a dataset read once (too few rows for a run is refused); `voice`: whom the
    messages name options for."""
    from infermeter.config.scenario import run_config
    from infermeter.emulator.config import load_emulator_config
    from infermeter.suites.registry import get_suite

    suite = get_suite(name)
    given = {key: dict(values) for key, values in given.items()}
    params = suite.params.build(given.pop("suite", {}), quick)
    load = given.setdefault("load", {})
    if quick:
        load.setdefault("warmup", QUICK_WARMUP)
    load["concurrency"] = 1  # a placeholder that makes the base a valid run: every run of a suite sets its own load
    base = run_config(None, given)
    api_key(base.target.api_key_env, voice)
    if base.workload.dataset is not None:  # read once before anything starts: a bad file costs nothing
        from infermeter.workload.source import WorkloadSource

        rows = WorkloadSource.read(base.workload).size()
        per_run = getattr(params, "requests", None)
        if isinstance(per_run, int) and per_run > rows:
            raise UserError(
                f"{option_text('dataset', base.workload.dataset, voice)} has {rows} requests, fewer than the "
                f"{per_run} each run of the '{name}' test sends: give a larger dataset, or "
                f"{option_text('requests', rows, voice)} or fewer"
            )
    emulator = None
    if base.target.url is None:
        emulator = load_emulator_config(emulator_config) if emulator_config else suite.emulator(params)
        emulator = emulator.with_scheduler(scheduler)
    return SuitePlan(name, suite, params, base, emulator, quick, command, voice)


def default_suite_dir(name: str) -> Path:
    """Where a suite goes when no directory is given: runs/test-NAME-YYYYmmdd-HHMMSS."""
    return Path("runs") / time.strftime(f"test-{name}-%Y%m%d-%H%M%S")


def test(
    name: str,
    /,
    *,
    quick: bool = False,
    out: str | PathLike[str] | None = None,
    emulator_config: str | PathLike[str] | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    report: bool = False,
    html: str | PathLike[str] | None = None,
    markdown: str | PathLike[str] | None = None,
    export: Iterable[ExportSpec | str] | ExportSpec | str = (),
    **options: Any,
) -> SuiteResult:
    """Run a test of the IETF draft's section 5 as a suite of runs, as `infermeter test NAME` does, and return its
    result (suite.json: tables, figures, requirements met or not, the compliance verdict).

    `name` is one `infermeter test --list` names ("ttft", "throughput", "tradeoff", "itl", "capacity",
    "fairness", "prefix-cache", "memory-pressure", "long-context", "guardrail", "grid", ...).  `options` are the
    test's: the target's (`url`, `api`, `model`, ...), `tokenizer`, `seed`, `warmup`, the monitors', the
    disclosures' and the test's own parameters (see `infermeter test NAME --help`), as Python values or the command
    line's strings.  `quick` scales durations and counts down (the verdict cannot then be compliant); `out` is the
    suite's directory (default runs/test-NAME-YYYYmmdd-HHMMSS), and one holding the same suite resumes it, reusing
    its finished runs; `html` / `markdown` also write the full report; `export` sends the results at the end.
    Nothing is printed unless asked: `progress=True` says each run and shows its progress on stderr, `report=True`
    prints the suite's report.  To repeat a whole suite (the command's --repeat), call it once per repeat with
    out=OUT/repeat-1 ... OUT/repeat-N: `infermeter compare` takes OUT as one system.

    >>> import tempfile, infermeter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     result = infermeter.test("ttft", quick=True, requests=20, rate=20, warmup="off", out=tmp + "/ttft")
    >>> result.suite, result.section, len(result.runs), result.verdict
    ('ttft', '5.1', 1, 'not compliant')
    """
    refuse_running_loop("test")
    return _test(name, quick, out, emulator_config, scheduler, progress, report, html, markdown, export, options)


vars(test)["__test__"] = False  # pytest collects functions named test*: this one runs a suite, not a test


async def test_async(
    name: str,
    /,
    *,
    quick: bool = False,
    out: str | PathLike[str] | None = None,
    emulator_config: str | PathLike[str] | None = None,
    scheduler: str | None = None,
    progress: bool = False,
    report: bool = False,
    html: str | PathLike[str] | None = None,
    markdown: str | PathLike[str] | None = None,
    export: Iterable[ExportSpec | str] | ExportSpec | str = (),
    **options: Any,
) -> SuiteResult:
    """`test` as a coroutine, for a caller whose event loop is running (Jupyter, an async program): the same options
    and result.  A suite drives its runs on event loops of its own, one after another, for minutes; it runs in a
    worker thread, so the caller's loop stays free.  Cancelling the task does not stop the suite (its runs are
    not the caller's); a suite stopped any other way resumes when called again with the same `out`."""
    return await asyncio.to_thread(
        _test, name, quick, out, emulator_config, scheduler, progress, report, html, markdown, export, options
    )


vars(test_async)["__test__"] = False


def _test(
    name: str,
    quick: bool,
    out: str | PathLike[str] | None,
    emulator_config: str | PathLike[str] | None,
    scheduler: str | None,
    progress: bool,
    report: bool,
    html: str | PathLike[str] | None,
    markdown: str | PathLike[str] | None,
    export: Iterable[ExportSpec | str] | ExportSpec | str,
    options: dict[str, Any],
) -> SuiteResult:
    """`test`'s body, run in the calling thread (`test`) or a worker thread (`test_async`)."""
    from rich.console import Console

    from infermeter.config import checks
    from infermeter.python_api.exporting import check, export_specs, send_suite, warn
    from infermeter.suites.registry import get_suite

    fields = suite_fields(get_suite(name))
    if "repeat" in options and "repeat" not in fields[-1].section.model_fields:
        raise UserError(
            "test() has no option 'repeat': call it once per repeat with out=OUT/repeat-1 ... OUT/repeat-N, which "
            "`infermeter compare` takes as one system"
        )
    given = given_from(options, fields, "test", f"infermeter test {name}", OWN)
    emulator_file, chosen = emulator_options(emulator_config, scheduler)
    where = output_path("out", out) or default_suite_dir(name)
    files = {k: checked(k, v, checks.report_file) for k, v in (("html", html), ("markdown", markdown)) if v is not None}
    specs = export_specs(export)
    plan = plan_suite(name, given, quick, emulator_file, chosen, _call_text(name, quick, out, options), "api")
    check(specs)
    result, infos = plan.run(where, progress, Console(stderr=True, quiet=not progress))
    if report:
        from infermeter.report.suite import suite_report

        print(suite_report(result, infos), flush=True)
    if files:
        from infermeter.report.documents import suite_document
        from infermeter.report.html import write_report

        doc = suite_document(result, infos)
        for kind, path in files.items():
            write_report(doc, path, kind == "markdown")
    warn(send_suite(specs, where))
    return result


def _call_text(name: str, quick: bool, out: str | PathLike[str] | None, options: dict[str, Any]) -> str:
    """The call as the report's reproduction section gives it (the command line's, for `infermeter test`)."""
    shown = {"quick": quick, "out": out, **options} if quick else {"out": out, **options}
    args = [repr(name)] + [
        f"{k}={fspath(v) if isinstance(v, PathLike) else v!r}" for k, v in shown.items() if v is not None
    ]
    return f"infermeter.test({', '.join(args)})"
