"""The exporters run at the end of a run or suite (`--export`): checked before the run starts, so a run is never
measured for nothing, and run after it, where a failure is a warning line: the results are already in the run
directory, which no exporter changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from infermeter import secrets
from infermeter.errors import UserError
from infermeter.exports.spec import ExportSpec

if TYPE_CHECKING:
    from infermeter.exports.finished import FinishedRun, FinishedSuite

T = TypeVar("T")
WHY_CHARS = 300  # an unexpected error's message is cut here: the warning stays one readable line


class Exporter(Protocol):
    """What each exporter module gives: a check before the run, and the export of a run and of a suite."""

    def check(self, where: str | None) -> None: ...

    def export_run(self, run: FinishedRun, where: str | None) -> None: ...

    def export_suite(self, suite: FinishedSuite, where: str | None) -> None: ...


def exporter(kind: str) -> Exporter:
    """The module of an exporter kind (spec.EXPORT_KINDS names them), imported when first used."""
    from infermeter.exports import mlflow_run, otlp, prometheus

    modules: dict[str, Exporter] = {"mlflow": mlflow_run, "otlp": otlp, "prometheus": prometheus}
    return modules[kind]


def shown(spec: ExportSpec) -> str:
    """The option as the user gave it, with credentials in its URL masked."""
    return spec.kind if spec.where is None else f"{spec.kind}:{secrets.redact_url(spec.where)}"


def check_exports(specs: Sequence[ExportSpec]) -> None:
    """Before a run starts: a one-line UserError, with the fix, for an exporter that cannot work (MLflow not
    installed, a Prometheus file in a directory that does not exist, an OTLP URL that is not http(s))."""
    for spec in specs:
        exporter(spec.kind).check(spec.where)


def export_run(specs: Sequence[ExportSpec], run_dir: Path) -> list[str]:
    """Send a finished run (or simulation) to every exporter; one warning line per exporter that failed."""
    from infermeter.exports.finished import read_run

    return _send(specs, lambda: read_run(run_dir), lambda e: e.export_run)


def export_suite(specs: Sequence[ExportSpec], suite_dir: Path) -> list[str]:
    """Send a finished suite and its runs to every exporter; one warning line per exporter that failed."""
    from infermeter.exports.finished import read_suite

    return _send(specs, lambda: read_suite(suite_dir), lambda e: e.export_suite)


def _send(
    specs: Sequence[ExportSpec], read: Callable[[], T], method: Callable[[Exporter], Callable[[T, str | None], None]]
) -> list[str]:
    """Read the results once, then run each exporter; every failure becomes a warning, nothing raises."""
    if not specs:
        return []
    try:
        finished = read()
    except Exception as exc:
        return [f"--export {shown(spec)} failed: {why(exc)}" for spec in specs]
    warnings = []
    for spec in specs:
        try:
            method(exporter(spec.kind))(finished, spec.where)
        except Exception as exc:  # an exporter's failure must not lose the run: it is reported, not raised
            warnings.append(f"--export {shown(spec)} failed: {why(exc)}")
    return warnings


def why(exc: Exception) -> str:
    """An error in one line, credentials masked: its message (the first line, cut to WHY_CHARS), or its type."""
    from infermeter.exports.failure import ExportFailed

    lines = str(exc).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    if len(text) > WHY_CHARS:
        text = text[: WHY_CHARS - 3] + "..."
    if not isinstance(exc, ExportFailed | UserError):
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return secrets.redact(text)
