"""suite.json as types: `SuiteResult` (a finished test suite: its runs, analysis, requirements and verdict) and the
`Table` its analysis holds, versioned (`infermeter.suite/1`), every model closed to stray keys.

A leaf of the package (it imports nothing of infermeter but the chart as data), so the suites that write it and the
reports and comparisons that read it both build on it without one importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from infermeter.chart import Chart

SUITE_SCHEMA: Final = "infermeter.suite/1"
SUITE_JSON: Final = "suite.json"  # a finished suite's result, beside its runs
SUITE_SETTINGS: Final = "suite-settings.json"  # what its runs are measured under: a resumed suite must be the same
SUITE_FILES: Final = (SUITE_JSON, SUITE_SETTINGS)  # what a suite's directory holds besides its runs and workloads
Level = Literal["MUST", "SHOULD"]
Verdict = Literal["unconditionally compliant", "conditionally compliant", "not compliant", "not verifiable"]


class Table(BaseModel):
    """One of the draft's report tables, as text cells (the console, Markdown and HTML render the same cells)."""

    model_config = ConfigDict(extra="forbid")
    caption: str
    headers: list[str]
    rows: list[list[str]]
    notes: list[str] = Field(default_factory=list)


class Requirement(BaseModel):
    """A MUST or SHOULD of the draft for this test, and whether the suite's runs met it, with the reason; `met` is
    None when the evidence cannot exist (a server that exports no such counter): "not verifiable", never met."""

    model_config = ConfigDict(extra="forbid")
    level: Level
    section: str  # the draft's section, e.g. "5.1.2.1"
    text: str
    met: bool | None
    reason: str

    @property
    def status(self) -> str:
        return "not verifiable" if self.met is None else "met" if self.met else "NOT MET"


class Analysis(BaseModel):
    """What a suite's analysis found: the tables, the key results in words, and the key figures by name (for
    scripts, tests and comparisons)."""

    model_config = ConfigDict(extra="forbid")
    tables: list[Table] = Field(default_factory=list)
    findings: list[str] = Field(default_factory=list)
    # a Mapping so that a suite's dict[str, float] passes as it is; validated into a dict
    figures: Mapping[str, int | float | str | bool | None] = Field(default_factory=dict)
    # the figures a comparison of two suites of this test holds side by side, each with its unit ("tok/s", "ms",
    # "req/s", "share", ...): the test's results, not its inputs or the fits' bookkeeping
    headline: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    plots: list[str] = Field(default_factory=list)  # drawn in text for the console (histograms, curves)
    charts: list[Chart] = Field(default_factory=list)  # drawn by the HTML report; kept in suite.json


class RunRef(BaseModel):
    """One run of the suite: its key (the directory name under runs/), what it measured, and whether it was reused
    from an earlier, interrupted start of the same suite."""

    model_config = ConfigDict(extra="forbid")
    key: str
    label: str
    run_dir: str
    reused: bool
    level: str | None = None  # its place in the plan, named alike in every suite of this test ("30%", "probe 2")
    sent: int | None = None  # the requests it sent (its summary's total); None in suites written before this field


class SuiteResult(BaseModel):
    """suite.json: everything the suite report shows, so a report can be printed again without the runs."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal["infermeter.suite/1"] = SUITE_SCHEMA
    suite: str
    section: str
    reference: str
    title: str
    quick: bool
    params: dict[str, Any]
    command: str
    directory: str
    runs: list[RunRef]
    analysis: Analysis
    requirements: list[Requirement]
    verdict: Verdict
    started_at: str
    finished_at: str
