"""What several suites share: the load a user gives a suite, latency rows in the draft's units, and the
requirements on sample counts and durations that recur across section 5."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from infermeter.config import checks
from infermeter.config.section import Flag
from infermeter.errors import UserError
from infermeter.metrics.summary_model import Stats
from infermeter.report.tables import fmt_ms, fmt_pct
from infermeter.suite_result import SUITE_JSON, Level, Requirement
from infermeter.suites.framework import SuiteParams
from infermeter.suites.lab import Run

EMULATOR_RATE = 20.0  # req/s: the embedded emulator's default engine carries it with room to spare


def finished_suite(value: Any) -> Path:
    """--from: the directory of a finished test suite (it holds suite.json)."""
    path = Path(str(value))
    if not str(value).strip() or not (path / SUITE_JSON).is_file():
        raise ValueError(f"{str(value)!r} holds no finished test suite ({SUITE_JSON}): give the directory of one")
    return path


def from_flag(help: str) -> Flag:
    """--from: a finished suite whose result this one builds on."""
    return Flag(help, finished_suite, ("--from",))


class LoadParams(SuiteParams):
    """A test measured at one load: an open-loop rate or a closed-loop concurrency."""

    rate: Annotated[float | None, Flag("open loop: requests per second (Poisson arrivals)", checks.RATE)] = None
    concurrency: Annotated[int | None, Flag("closed loop: requests kept in flight", checks.integer(1, 100_000))] = None

    def load(self, embedded: bool) -> dict[str, Any]:
        """The load section of a run; the embedded emulator has a default rate, a server needs one given."""
        if self.rate is not None and self.concurrency is not None:
            raise UserError("give either --rate (open loop) or --concurrency (closed loop), not both")
        if self.concurrency is not None:
            return {"concurrency": self.concurrency}
        if self.rate is None and not embedded:
            raise UserError("give the load: --rate R (open loop) or --concurrency C (closed loop)")
        return {"rate": self.rate if self.rate is not None else EMULATOR_RATE}


def percentiles_row(name: str, stats: Stats, ps: tuple[float, ...] = (50.0, 95.0, 99.0)) -> list[str]:
    return [name, *[fmt_ms(stats.percentile(p)) for p in ps]]


def requirement(level: Level, section: str, text: str, met: bool | None, reason: str) -> Requirement:
    return Requirement(level=level, section=section, text=text, met=met, reason=reason)


def not_verifiable(level: Level, section: str, text: str, why: str) -> Requirement:
    """A requirement the runs cannot show met or unmet (the evidence cannot exist here), with why."""
    return requirement(level, section, text, None, why)


def at_least(level: Level, section: str, text: str, have: float, need: float, unit: str) -> Requirement:
    """A minimum the draft sets (samples, seconds, requests), met or not, with both figures."""
    return requirement(level, section, text, have >= need, f"{have:g} {unit} (the draft asks for >= {need:g})")


def headline(figures: Mapping[str, object], units: dict[str, str]) -> dict[str, str]:
    """The figures a comparison of suites holds side by side (`units`: name or name prefix -> unit), those present."""
    out = {}
    for name in figures:
        unit = units.get(name) or next((u for k, u in units.items() if k.endswith("_") and name.startswith(k)), None)
        if unit is not None and isinstance(figures[name], int | float) and not isinstance(figures[name], bool):
            out[name] = unit
    return out


def success(run: Run) -> str:
    return fmt_pct(run.summary.requests.success_rate)
