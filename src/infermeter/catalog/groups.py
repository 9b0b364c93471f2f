"""Runs into groups of repeats, and groups into series in time order: what a trend draws point by point and what a
regression check holds the newest group of against the one before.

A group (`dir`, the default) is the runs that sit in one directory: a CI job that writes its three repeats into one
directory makes one group; a suite's runs are grouped by their key in its plan (a load level), across the repeats of
`infermeter test --repeat`.  With `run` each run is a group of its own.  A series is the groups of one value of the
`--by` column; a suite's levels are series of their own, as a trend across load levels would compare unlike runs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from infermeter.catalog.columns import Scalar, as_text

if TYPE_CHECKING:
    from infermeter.catalog.entry import CatalogRun

GroupBy = Literal["dir", "run"]
GROUPINGS: tuple[GroupBy, ...] = ("dir", "run")


@dataclass
class Point:
    """A group of runs: one point of a series, at the time its first run started."""

    label: str
    runs: list[CatalogRun] = field(default_factory=list)

    @property
    def started_at(self) -> dt.datetime:
        return min(r.started_at for r in self.runs)


@dataclass
class Series:
    """The groups of one `--by` value (and one suite level), oldest first; `name` is empty when all runs are one
    series."""

    name: str
    points: list[Point]


def group_key(run: CatalogRun, by: GroupBy) -> str:
    """The group a run belongs to: its own path (`run`), or its directory, a suite run's suite and key (`dir`)."""
    if by == "run":
        return run.run_id
    if run.suite is not None:
        return f"{run.suite.root} [{run.suite.key}]"
    return str(run.path.parent)


def _series_key(run: CatalogRun, by_column: str | None, by_values: dict[str, Scalar]) -> str:
    parts = []
    if by_column is not None:
        value = by_values.get(run.run_id)
        parts.append(f"{by_column}={'null' if value is None else as_text(value)}")
    if run.suite is not None:
        parts.append(f"{run.suite.test} '{run.suite.level or run.suite.key}'")
    return ", ".join(parts)


def series_of(
    runs: list[CatalogRun], by: GroupBy, by_column: str | None = None, by_values: dict[str, Scalar] | None = None
) -> list[Series]:
    """The runs as series of groups, each series' groups in time order (of their first run; then by label), the
    series in the order their first group started."""
    points: dict[tuple[str, str], Point] = {}
    for run in sorted(runs, key=lambda r: (r.started_at, r.run_id)):
        series = _series_key(run, by_column, by_values or {})
        key = group_key(run, by)
        label = run.run_id if by == "run" else key
        points.setdefault((series, key), Point(label)).runs.append(run)
    grouped: dict[str, list[Point]] = {}
    for (series, _), point in points.items():
        grouped.setdefault(series, []).append(point)
    out = [Series(name, sorted(pts, key=lambda p: (p.started_at, p.label))) for name, pts in grouped.items()]
    return sorted(out, key=lambda s: (s.points[0].started_at, s.name))
