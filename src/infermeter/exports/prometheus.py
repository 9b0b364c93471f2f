"""`--export prometheus:FILE`: a run's (or a suite's) headline figures in the Prometheus text format, for
node_exporter's textfile collector (`--collector.textfile.directory`, which reads the directory's `*.prom` files).

Every figure is a gauge named `infermeter_<what>[_<statistic>]_<base unit>` (seconds, not milliseconds; ratios, not
percentages), with HELP and TYPE lines and the labels run, model, api and kind (suite too, for a suite's runs).  The
file is written to a temporary file beside it and renamed over it, so the collector never reads half a file; each
export replaces the whole file: it holds the latest run or suite exported to it (Prometheus keeps the history as
it scrapes; give each pipeline a file of its own to see several side by side)."""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from infermeter.config.checks import refuse_results_file
from infermeter.errors import UserError
from infermeter.exports.failure import ExportFailed
from infermeter.exports.finished import FinishedRun, FinishedSuite
from infermeter.exports.measures import BASE_UNITS, SUITE_UNITS, measure

FILE_MODE = 0o644  # node_exporter usually runs as another user: the file must be readable by it


@dataclass(frozen=True)
class Series:
    """One sample line: the metric's name and HELP text, its labels, its value."""

    name: str
    help: str
    labels: dict[str, str]
    value: float


def run_series(run: FinishedRun, extra: dict[str, str] | None = None) -> list[Series]:
    """A run's headline figures in base units, and when it ended, each labelled with the run."""
    labels = {**run.labels, **(extra or {})}
    out = [Series((m := measure(f)).prometheus_name, m.help, labels, m.prometheus_value) for f in run.figures]
    end = "when the run's measurement ended, in seconds since the Unix epoch"
    out.append(Series("infermeter_run_end_timestamp_seconds", end, labels, run.end_ns / 1e9))
    return out


def suite_series(suite: FinishedSuite) -> list[Series]:
    """A suite's verdict (1, the verdict a label), its headline figures (named by a label, since a suite chooses its
    figures' names; one metric per base unit, converted as the run's figures are), when it finished, and every run's
    figures."""
    result = suite.result
    labels = {"suite": suite.name, "test": result.suite}
    out = [
        Series(
            "infermeter_suite_verdict",
            f"the suite's compliance verdict ({result.reference}), as the label verdict",
            {**labels, "verdict": result.verdict},
            1.0,
        )
    ]
    for name, (value, unit) in suite.figures.items():
        base, scale = BASE_UNITS.get(SUITE_UNITS.get(unit, unit), ("", 1.0))  # one metric per base unit
        metric = f"infermeter_suite_figure_{base}" if base else "infermeter_suite_figure"
        what = f"in {base.replace('_', ' ')}" if base else "a count, index or other dimensionless number"
        figure_help = f"a headline figure of the suite's analysis (its name the label figure), {what}"
        out.append(Series(metric, figure_help, {**labels, "figure": name}, value * scale))
    end = "when the suite finished, in seconds since the Unix epoch"
    out.append(Series("infermeter_suite_end_timestamp_seconds", end, labels, suite.end_ns / 1e9))
    for _, run in suite.runs:
        out += run_series(run, {"suite": suite.name})
    return out


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def render(series: Iterable[Series]) -> str:
    """The text format: each metric's HELP and TYPE once, then all its samples (the format wants them together)."""
    families: dict[str, list[Series]] = {}
    for s in series:
        families.setdefault(s.name, []).append(s)
    lines = []
    for name, samples in families.items():
        lines += [f"# HELP {name} {_escape_help(samples[0].help)}", f"# TYPE {name} gauge"]
        for s in samples:
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in s.labels.items())
            lines.append(f"{name}{{{labels}}} {_number(s.value)}" if labels else f"{name} {_number(s.value)}")
    return "\n".join(lines) + "\n"


def check(where: str | None) -> None:
    """Before a run: a file is given, its directory exists, and it is neither a directory nor a run's or a suite's
    file."""
    if not where:
        raise UserError("--export prometheus needs a file: --export prometheus:FILE")
    path = Path(where)
    refuse_results_file(path, f"--export prometheus:{where}")
    if path.is_dir():
        example = path / "infermeter.prom"
        raise UserError(f"--export prometheus:{where} is a directory: give a file in it, e.g. {example}")
    if not path.parent.is_dir():
        raise UserError(
            f"--export prometheus:{where}: the directory {path.parent} does not exist: create it, or give a file in "
            "node_exporter's --collector.textfile.directory"
        )


def write_atomically(path: Path, text: str) -> None:
    """Write the file through a temporary file in its directory (not named *.prom, so the collector skips it) and a
    rename; ExportFailed, with nothing left behind, when the disk refuses."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise ExportFailed(f"{path} cannot be written ({exc.strerror or exc})") from None


def _file(where: str | None) -> Path:
    """The file to write, checked again as it is written: a run or suite may have been written there since."""
    if not where:
        raise ExportFailed("no file given: --export prometheus:FILE")
    path = Path(where)
    refuse_results_file(path)
    return path


def export_run(run: FinishedRun, where: str | None) -> None:
    """Write a run's figures to the file, replacing what it held."""
    write_atomically(_file(where), render(run_series(run)))


def export_suite(suite: FinishedSuite, where: str | None) -> None:
    """Write a suite's figures and its runs' to the file, replacing what it held."""
    write_atomically(_file(where), render(suite_series(suite)))
