"""A suite from start to report: claim (or resume) its directory, run its procedure, analyse, judge compliance, and
keep the result as suite.json beside the runs."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from infermeter import resumable
from infermeter.errors import UserError
from infermeter.records import RUN_JSON, holds_run
from infermeter.run_info import wall_clock_iso
from infermeter.suite_result import SUITE_JSON, SUITE_SETTINGS, RunRef, SuiteResult
from infermeter.suites.disclosures import common_requirements
from infermeter.suites.framework import Suite, SuiteParams, verdict
from infermeter.suites.lab import RUNS, Lab

REPEAT = "repeat-"  # `infermeter test NAME --repeat N` keeps each repeat as a whole suite directory, OUT/repeat-K


def repeat_dirs(path: Path) -> list[Path]:
    """The repeat directories of a suite run with --repeat (repeat-K, K in ASCII digits), in order (none: `path` is
    no such directory); "repeat-²" is not one (str.isdigit takes it, int() does not)."""
    if not path.is_dir():
        return []
    found = [(p.name.removeprefix(REPEAT), p) for p in path.iterdir() if p.name.startswith(REPEAT) and p.is_dir()]
    return [p for k, p in sorted((int(k), p) for k, p in found if re.fullmatch(r"[0-9]+", k))]


def claim_suite_dir(out: Path, settings: dict[str, Any], what: str, shown: str | None = None) -> bool:
    """Start a suite in `out`, or resume the one there if it has the same settings; True when resuming.  `shown`:
    how the caller gave `out` (default `--out OUT`; the Python API's `out='OUT'`)."""
    shown = shown or f"--out {out}"
    if holds_run(out):
        raise UserError(f"{shown} holds a single run, not a test suite: choose another directory")
    if not (out / SUITE_SETTINGS).exists() and out.is_dir() and any(out.iterdir()):
        raise UserError(f"{shown} is not empty and holds no test suite: choose a new directory")
    return resumable.claim(out, SUITE_SETTINGS, settings, what)


def execute(suite: Suite, lab: Lab, params: SuiteParams, quick: bool, command: str) -> SuiteResult:
    """Run the suite's procedure in `lab`, analyse it and judge it; suite.json is written before returning."""
    started = wall_clock_iso()
    measured = suite.procedure(lab, params)
    analysis = suite.analyze(measured, params)
    requirements = suite.requirements(measured, analysis, params, quick)
    requirements += common_requirements([r.info for r in lab.runs], quick)
    result = SuiteResult(
        suite=suite.name,
        section=suite.section,
        reference=getattr(suite, "reference", f"IETF draft, section {suite.section}"),
        title=suite.title,
        quick=quick,
        params=params.model_dump(mode="json"),
        command=command,
        directory=str(lab.out),
        runs=[
            RunRef(
                key=r.key,
                label=r.label,
                run_dir=str(r.run_dir),
                reused=r.reused,
                level=r.level,
                sent=r.summary.requests.total,
            )
            for r in lab.runs
        ],
        analysis=analysis,
        requirements=requirements,
        verdict=verdict(requirements),
        started_at=started,
        finished_at=wall_clock_iso(),
    )
    save(lab.out, result)
    return result


def save(out: Path, result: SuiteResult) -> None:
    """suite.json, replaced atomically (a kill mid-write leaves the previous one)."""
    tmp = out / (SUITE_JSON + ".tmp")
    tmp.write_text(result.model_dump_json(indent=2))
    os.replace(tmp, out / SUITE_JSON)


def load_result(suite_dir: Path) -> SuiteResult:
    """A finished suite's suite.json; a damaged or foreign one is a one-line error naming the file."""
    from pydantic import ValidationError

    from infermeter.run_info import validation_problem

    path = suite_dir / SUITE_JSON
    try:
        return SuiteResult.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise UserError(f"{path} cannot be read ({exc.strerror})") from None
    except ValidationError as exc:
        raise UserError(f"{path} is not a valid suite result: {validation_problem(exc, SUITE_JSON)}") from None


def suite_run_dirs(suite_dir: Path, result: SuiteResult) -> dict[str, Path]:
    """Where each of a suite's runs is, by its key, for the runs that are there: in the suite's own directory
    (SUITE/runs/KEY, where the suite wrote it: the suite may have been moved or copied since), else where suite.json
    recorded it (a directory holding run.json).  A run in neither place is left out: the caller says what that means."""
    found = {}
    for ref in result.runs:
        for candidate in (suite_dir / RUNS / ref.key, Path(ref.run_dir)):
            if (candidate / RUN_JSON).is_file():
                found[ref.key] = candidate
                break
    return found
