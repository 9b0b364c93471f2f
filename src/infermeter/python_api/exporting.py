"""`--export` (and the API's `export=`) around a run, simulation or suite: every exporter checked before anything
runs, the results sent at the end (infermeter.exports.send), each problem there a warning that changes no outcome."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from infermeter.errors import UserError
from infermeter.exports.spec import ExportSpec, parse_export


def export_specs(values: Iterable[ExportSpec | str] | ExportSpec | str) -> list[ExportSpec]:
    """The API's `export=`: specs, or the texts `--export` takes ("mlflow", "otlp:URL", "prometheus:FILE"); one
    text or spec alone counts as a list of one."""
    if isinstance(values, ExportSpec | str):
        values = [values]
    specs = []
    for value in values:
        if isinstance(value, ExportSpec):
            specs.append(value)
            continue
        try:
            specs.append(parse_export(value))
        except ValueError as exc:
            raise UserError(f"export={value!r}: {exc}") from None
    return specs


def check(specs: Sequence[ExportSpec]) -> None:
    """Before anything runs: a UserError when an exporter asked for cannot work (MLflow not installed, say)."""
    if specs:
        from infermeter.exports.send import check_exports

        check_exports(list(specs))


def send_run(specs: Sequence[ExportSpec], run_dir: Path, stopped: str | None = None) -> list[str]:
    """At the end of a run or simulation: send it, and return the warnings (one line each, without "warning: ").
    A run stopped early (`stopped`: why) is not sent: half a run would stand among whole ones."""
    if not specs:
        return []
    if stopped is not None:
        return [f"the results were not exported: the run stopped early ({stopped})"]
    from infermeter.exports.send import export_run

    return export_run(list(specs), run_dir)


def send_suite(specs: Sequence[ExportSpec], suite_dir: Path) -> list[str]:
    """At the end of a suite (with repeats: of each repeat's directory): send it, and return the warnings."""
    if not specs:
        return []
    from infermeter.exports.send import export_suite

    return export_suite(list(specs), suite_dir)


def warn(lines: Iterable[str]) -> None:
    """The API's way to report an export problem: a Python warning per line."""
    for line in lines:
        warnings.warn(line, RuntimeWarning, stacklevel=3)


def print_warnings(lines: Iterable[str]) -> None:
    """The command line's: each line on stderr as "warning: ...", the exit code left as the run's."""
    for line in lines:
        print(f"warning: {line}", file=sys.stderr, flush=True)
