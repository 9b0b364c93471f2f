"""What a test suite of the IETF draft's section 5 is: declared setup parameters (the draft's minimums as defaults,
scaled down by --quick), a procedure that asks a Lab for runs, an analysis that turns the runs into the draft's tables,
and the MUSTs and SHOULDs of the test, each met or not, ending in the section 2 verdict.  What a finished suite holds
(suite.json: its analysis, requirements and verdict) is the contract floor's infermeter.suite_result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from infermeter.config.section import Section
from infermeter.suite_result import Analysis, Requirement, Verdict

if TYPE_CHECKING:
    from infermeter.emulator.config import EmulatorConfig


class SuiteParams(Section):
    """A suite's setup parameters; `QUICK` holds the values --quick uses for the ones the user did not give."""

    title = "suite"
    QUICK: ClassVar[dict[str, Any]] = {}

    @classmethod
    def build(cls, given: dict[str, Any], quick: bool) -> Self:
        """The parameters from the command line's values, with --quick's scaled-down values where none was given."""
        return cls.model_validate({**(cls.QUICK if quick else {}), **given})


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
