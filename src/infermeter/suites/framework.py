"""What a test suite of the IETF draft's section 5 is: declared setup parameters (the draft's minimums as defaults,
scaled down by --quick), a procedure that asks a Lab for runs, an analysis that turns the runs into the draft's tables,
and the MUSTs and SHOULDs of the test, each met or not, ending in the section 2 verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from infermeter.config.section import Section
from infermeter.report.chart import Chart

if TYPE_CHECKING:
    from infermeter.emulator.config import EmulatorConfig

SUITE_SCHEMA = "infermeter.suite/1"
Level = Literal["MUST", "SHOULD"]
Verdict = Literal["unconditionally compliant", "conditionally compliant", "not compliant", "not verifiable"]


SUITE_JSON = "suite.json"  # a finished suite's result, beside its runs


class SuiteParams(Section):
    """A suite's setup parameters; `QUICK` holds the values --quick uses for the ones the user did not give."""

    title = "suite"
    QUICK: ClassVar[dict[str, Any]] = {}

    @classmethod
    def build(cls, given: dict[str, Any], quick: bool) -> SuiteParams:
        """The parameters from the command line's values, with --quick's scaled-down values where none was given."""
        return cls.model_validate({**(cls.QUICK if quick else {}), **given})


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
    figures: dict[str, int | float | str | bool | None] = Field(default_factory=dict)
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


def verdict(requirements: list[Requirement]) -> Verdict:
    """The draft's section 2: any MUST unmet is not compliant; all MUSTs and SHOULDs met is unconditionally
    compliant; all MUSTs but not every SHOULD is conditionally compliant.  A MUST whose evidence could not exist
    (none unmet) leaves compliance not verifiable: the runs cannot show it either way."""
    if any(r.level == "MUST" and r.met is False for r in requirements):
        return "not compliant"
    if any(r.level == "MUST" and r.met is None for r in requirements):
        return "not verifiable"
    if all(r.met for r in requirements):
        return "unconditionally compliant"
    return "conditionally compliant"


class Suite(Protocol):
    """One test of the draft's section 5 (or another procedure built the same way, e.g. exo bench's grid)."""

    name: str  # the command's name: `infermeter test NAME`
    section: str  # the draft's section, e.g. "5.3"
    reference: str  # the method it follows, as the report names it: "IETF draft, section 5.3"
    title: str
    summary: str  # one line for `infermeter test --list`
    params: type[SuiteParams]

    def emulator(self, params: Any) -> EmulatorConfig:
        """The embedded emulator configured so that this test shows what it exists to show."""
        ...

    def procedure(self, lab: Any, params: Any) -> Any:
        """Ask `lab` for the runs (lab.run), deciding the next from the last where the procedure searches; return
        what the analysis needs (usually the runs)."""
        ...

    def analyze(self, measured: Any, params: Any) -> Analysis:
        """The draft's tables and derived figures from the runs."""
        ...

    def requirements(self, measured: Any, analysis: Analysis, params: Any, quick: bool) -> list[Requirement]:
        """This test's own MUSTs and SHOULDs (the ones every run shares are added by the framework)."""
        ...
