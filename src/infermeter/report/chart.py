"""A plot as data: traces, axis titles with units, and marked points, independent of the drawing library.  Suites
keep their charts in suite.json this way; the HTML report draws them with plotly.js (`plotly_figure`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TraceKind = Literal["line", "markers", "lines+markers", "step", "bar", "histogram", "box"]
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")


class Trace(BaseModel):
    """One series.  `x`/`y` hold None where a line breaks (a timeline draws many segments as one trace); a box
    trace gives its five figures in `box` (min, P25, P50, P75, max) instead of samples."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: TraceKind = "line"
    x: list[float | str | None] = Field(default_factory=list)
    y: list[float | str | None] = Field(default_factory=list)
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


def _axis_name(kind: str, index: int) -> str:
    return kind if index == 1 else f"{kind}{index}"


def plotly_figure(chart: Chart) -> dict[str, Any]:
    """The chart as a plotly.js figure ({"data", "layout"}), panels stacked top to bottom on one x axis."""
    n = len(chart.panels)
    gap = 0.04 if n > 1 else 0.0
    span = (1.0 - gap * (n - 1)) / n
    layout: dict[str, Any] = {
        "title": {"text": chart.title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        "margin": {"l": 70, "r": 70 if chart.y2_title else 25, "t": 45, "b": 100},
        "height": chart.height or (340 + 170 * (n - 1)),
        # the legend sits at the page's bottom edge, under the x axis title
        "legend": {"orientation": "h", "yref": "container", "y": 0.01, "yanchor": "bottom", "x": 0},
        "hovermode": "closest",
        "template": None,
        "plot_bgcolor": "#fff",
        "barmode": "overlay" if any(t.kind == "histogram" for t in chart.traces) else "group",
        "xaxis": {
            "title": {"text": chart.x_title},
            "type": "log" if chart.x_log else "-",  # "-": plotly decides (numbers, or categories such as groups)
            "showgrid": True,
            "gridcolor": "#e5e5e5",
            "zeroline": False,
            "anchor": _axis_name("y", n),
        },
    }
    for i, title in enumerate(chart.panels, start=1):
        top = 1.0 - (i - 1) * (span + gap)
        layout[_axis_name("yaxis", i)] = {
            "title": {"text": title, "font": {"size": 12}},
            "type": "log" if chart.y_log else "linear",
            "domain": [max(0.0, top - span), top],
            "showgrid": True,
            "gridcolor": "#e5e5e5",
            "zeroline": False,
            "anchor": "x",
        }
    if chart.y2_title:
        layout[_axis_name("yaxis", n + 1)] = {
            "title": {"text": chart.y2_title, "font": {"size": 12}},
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
            "anchor": "x",
        }
    data = [_trace(t, i, n) for i, t in enumerate(chart.traces)]
    shapes, notes = [], []
    for k, m in enumerate(chart.marks):
        yref = _axis_name("y", m.row)
        if m.x is not None:
            shapes.append(_line("x", yref + " domain", m.x, (0, 1)))
            same = sum(o.x == m.x and o.row == m.row for o in chart.marks[:k])  # labels at one x stack, not overlap
            notes.append(
                {
                    "x": m.x,
                    "y": 1,
                    "xref": "x",
                    "yref": yref + " domain",
                    "text": m.label,
                    "showarrow": False,
                    "yanchor": "bottom",
                    "yshift": 14 * same,
                    "textangle": 0,
                    "font": {"size": 11},
                }
            )
        elif m.y is not None:
            shapes.append(_line("x domain", yref, m.y, None))
            notes.append(
                {
                    "x": 1,
                    "y": m.y,
                    "xref": "x domain",
                    "yref": yref,
                    "text": m.label,
                    "showarrow": False,
                    "xanchor": "right",
                    "yanchor": "bottom",
                    "font": {"size": 11},
                }
            )
    layout["shapes"], layout["annotations"] = shapes, notes
    return {"data": data, "layout": layout}


def _line(xref: str, yref: str, at: float, span: tuple[int, int] | None) -> dict[str, Any]:
    style = {"color": "#555", "width": 1, "dash": "dot"}
    if span is not None:  # vertical
        return {
            "type": "line",
            "xref": xref,
            "yref": yref,
            "x0": at,
            "x1": at,
            "y0": span[0],
            "y1": span[1],
            "line": style,
        }
    return {"type": "line", "xref": xref, "yref": yref, "x0": 0, "x1": 1, "y0": at, "y1": at, "line": style}


def _trace(t: Trace, index: int, panels: int) -> dict[str, Any]:
    color = t.color or PALETTE[index % len(PALETTE)]
    yaxis = _axis_name("y", panels + 1) if t.secondary else _axis_name("y", t.row)
    out: dict[str, Any] = {"name": t.name, "xaxis": "x", "yaxis": yaxis}
    if t.kind == "box":
        lo, q1, med, q3, hi = t.box or (0.0, 0.0, 0.0, 0.0, 0.0)
        at = [t.x[0] if t.x else t.name]
        return {
            **out,
            "type": "box",
            ("x" if t.orientation == "v" else "y"): at,
            "q1": [q1],
            "median": [med],
            "q3": [q3],
            "lowerfence": [lo],
            "upperfence": [hi],
            "marker": {"color": color},
            "orientation": t.orientation,
        }
    if t.kind == "histogram":
        return {**out, "type": "histogram", "x": t.x, "opacity": 0.6, "marker": {"color": color}}
    if t.kind == "bar":
        return {
            **out,
            "type": "bar",
            "x": t.x,
            "y": t.y,
            "marker": {"color": color},
            "orientation": t.orientation,
            **({"text": t.text, "hoverinfo": "text+name"} if t.text else {}),
        }
    mode = {"line": "lines", "step": "lines", "markers": "markers", "lines+markers": "lines+markers"}[t.kind]
    line: dict[str, Any] = {"color": color, "width": t.width or 2}
    if t.kind == "step":
        line["shape"] = "hv"
    if t.dash:
        line["dash"] = "dash"
    out.update(
        {
            "type": "scatter",
            "mode": mode,
            "x": t.x,
            "y": t.y,
            "line": line,
            "marker": {"color": color, "size": 5 if len(t.x) > 200 else 8},
        }
    )
    if t.text:
        out.update({"text": t.text, "hoverinfo": "text+name"})
    return out
