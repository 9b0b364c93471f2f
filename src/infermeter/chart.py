"""A plot as data: traces, axis titles with units, and marked points, independent of the drawing library.

A leaf of the package (it imports nothing of infermeter): suites keep their charts in suite.json this way and reports
of runs build them too; the HTML report draws them with plotly.js (report.chart.plotly_figure).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

TraceKind = Literal["line", "markers", "lines+markers", "step", "bar", "histogram", "box"]
# a trace's coordinates: any sequence of numbers or words is taken (a list[int] as well), and kept as a list
Values = Annotated[Sequence[float | str | None], AfterValidator(list)]


class Trace(BaseModel):
    """One series.  `x`/`y` hold None where a line breaks (a timeline draws many segments as one trace); a box
    trace gives its five figures in `box` (min, P25, P50, P75, max) instead of samples."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: TraceKind = "line"
    x: Values = Field(default_factory=list)
    y: Values = Field(default_factory=list)
    row: int = 1  # the panel of a chart with stacked panels on one shared x axis (1 = top)
    secondary: bool = False  # drawn against the right-hand y axis
    color: str | None = None
    dash: bool = False
    width: float | None = None
    text: list[str] | None = None  # hover text per point
    box: list[float] | None = None
    orientation: Literal["v", "h"] = "v"

    def points(self) -> int:
        """How many points the trace draws (a box counts as one)."""
        if self.kind == "box":
            return 1
        if self.kind == "histogram":
            return len(self.x) or len(self.y)
        return sum(v is not None for v in self.x) if self.x else len(self.y)


class Mark(BaseModel):
    """A vertical (x) or horizontal (y) line with a label: a knee, a saturation point, an SLO bound."""

    model_config = ConfigDict(extra="forbid")
    label: str
    x: float | None = None
    y: float | None = None
    row: int = 1


class Chart(BaseModel):
    """One figure: stacked panels (`panels` y titles, top first) share the x axis, e.g. throughput, in-flight
    requests and the server's gauges over the run's time."""

    model_config = ConfigDict(extra="forbid")
    id: str
    title: str
    x_title: str
    panels: list[str]  # y axis title of each panel, with units
    y2_title: str | None = None
    traces: list[Trace] = Field(default_factory=list)
    marks: list[Mark] = Field(default_factory=list)
    x_log: bool = False
    y_log: bool = False
    note: str = ""  # a line under the figure: a verdict, a fit, what was left out
    height: int | None = None

    def points(self) -> int:
        return sum(t.points() for t in self.traces)
